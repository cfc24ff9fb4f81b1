#include "coord/failover.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "coord/verify.h"
#include "net/link_shaper.h"
#include "net/transport.h"
#include "plan/board_kind.h"
#include "util/endpoint.h"
#include "util/error.h"

namespace ts::coord {

using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Board b at "host:port" or "[v6]:port" -> a transport over its kind's
// network (throws NetError).
std::unique_ptr<net::Transport> connect_address(const plan::Board& b, const std::string& a,
                                                std::chrono::milliseconds timeout, bool once = false) {
  Endpoint e;
  if (!parse_endpoint(a, &e)) throw net::NetError("board address '" + a + "' is not host:port");
  return net::network(plan::kind_of(b).transport).connect(e, timeout, once ? net::kForever : net::Millis(100));
}

// "board 1" / "boards 0, 2"
std::string board_list(const std::vector<int>& boards) {
  std::string s;
  for (int b : boards) s += (s.empty() ? "" : ", ") + std::to_string(b);
  return (boards.size() == 1 ? "board " : "boards ") + s;
}

}  // namespace

Swarm::Swarm(const QGraph& q, const plan::Testbed& tb, const plan::PlanOptions& popt, std::vector<std::string> addresses,
             const plan::Plan& initial, SwarmOptions opt)
    : q_(q), tb_(tb), popt_(popt), addr_(std::move(addresses)), opt_(opt),
      plan_(std::make_unique<plan::Plan>(initial)) {
  if (addr_.size() != tb_.boards.size()) throw Error("swarm: one address per testbed board expected");
  for (size_t i = 0; i < tb_.boards.size(); ++i) alive_.push_back(int(i));
}

Swarm::~Swarm() { close(); }

void Swarm::close() {
  if (coord_) coord_->close();
  coord_.reset();
}

// Notes of a recovery are printed once it succeeded: a run that ends in an
// error prints that one line only.
void Swarm::note(const std::string& line) { notes_.push_back(line); }

void Swarm::flush_notes() {
  if (opt_.progress)
    for (const auto& n : notes_) std::fprintf(stderr, "tinysplit: failover: %s\n", n.c_str());
  std::fflush(stderr);
  notes_.clear();
}

plan::Testbed Swarm::sub_testbed() const {
  plan::Testbed t;
  for (int b : alive_) t.boards.push_back(tb_.boards[size_t(b)]);
  return t;
}

// Links are numbered by testbed index: errors name the board as the user
// knows it, and frames go to dst = the board's own id.
std::vector<std::unique_ptr<BoardLink>> Swarm::connect(const std::vector<int>& boards) {
  std::vector<std::unique_ptr<BoardLink>> links;
  for (int b : boards) {
    std::unique_ptr<net::Transport> t;
    try {
      t = connect_address(tb_.boards[size_t(b)], addr_[size_t(b)], opt_.timeout);
    } catch (const std::exception& e) {
      throw BoardError("board " + std::to_string(b) + " (" + addr_[size_t(b)] + "): " + e.what(), b);
    }
    if (opt_.link) t = std::make_unique<net::ShapedTransport>(std::move(t), opt_.link);
    links.push_back(std::make_unique<BoardLink>(std::move(t), b, opt_.window, opt_.timeout));
    secure(*links.back());
  }
  return links;
}

// Failover re-plans and reruns on both routes. With --route direct the
// boards also hold links to each other: a new PEERS table closes the links
// of the old plan, and a board that loses a peer link mid-inference reports
// it to the coordinator (an ERROR naming the peer), which then decides here
// like for any other failure.
bool Swarm::failover_applies() const { return opt_.failover; }

void Swarm::secure(BoardLink& l) const {
  if (!opt_.auth) return;
  uint8_t nonce[auth::kNonceBytes];
  net::random_bytes(nonce, sizeof nonce);
  l.set_auth(opt_.key.data(), nonce);
}

void Swarm::start() {
  std::vector<std::unique_ptr<BoardLink>> links;
  for (size_t b = 0; b < addr_.size(); ++b) {
    links.push_back(std::make_unique<BoardLink>(connect_address(tb_.boards[b], addr_[b], opt_.timeout), int(b), opt_.window,
                                                opt_.timeout));
    secure(*links.back());
  }
  CoordOptions copt;
  copt.timeout = opt_.timeout;
  copt.progress = opt_.progress;
  coord_ = std::make_unique<Coordinator>(q_, *plan_, std::move(links), copt);
  coord_->handshake(false);
  // Links the testbed left to the boards' kind are what the boards told.
  const std::vector<int> told = coord_->told_links();
  plan::Testbed tb = tb_;
  for (size_t w = 0; w < told.size(); ++w) {
    plan::Board& b = tb.boards[size_t(alive_[w])];
    if (b.links == 0 && told[w] != plan::board_links(b)) {
      b.links = told[w];
      learned_.push_back(alive_[w]);
    }
  }
  if (learned_.empty()) coord_->check_budgets();
  else replan(tb);
}

ProbeResult Swarm::probe(int w) { return coord_->probe(w); }

void Swarm::replan(const plan::Testbed& tb) {
  if (tb.boards.size() != tb_.boards.size()) throw Error("swarm: the new testbed has another number of boards");
  tb_ = tb;
  auto next = std::make_unique<plan::Plan>(plan::make_plan(q_, sub_testbed(), popt_));
  coord_->set_plan(*next);
  plan_ = std::move(next);
}

// A board is healthy when a fresh connection gets its HELLO and a PROBE is
// echoed, each within the timeout. A new coordinator connection also starts
// a new session on the board (work in progress dropped).
bool Swarm::healthy(int board, std::string* why, std::chrono::milliseconds limit, bool* timed_out) {
  if (timed_out) *timed_out = false;
  const auto wait = std::min(opt_.timeout, limit);
  try {
    // A board whose process is gone is refused at once, and that is final
    // (one attempt); a lost SYN on a lossy link is retransmitted by the
    // kernel within min(timeout, 3 s).
    std::unique_ptr<net::Transport> t;
    try {
      t = connect_address(tb_.boards[size_t(board)], addr_[size_t(board)], wait, true);
    } catch (const std::exception& e) {
      *why = "board " + std::to_string(board) + " (" + addr_[size_t(board)] + "): " + e.what();
      return false;
    }
    // A live board answers in milliseconds; 3 s also covers a few TCP
    // retransmissions on a lossy link, and keeps a hung board from costing
    // a whole --timeout a second time.
    BoardLink l(std::move(t), board, opt_.window, wait);
    secure(l);
    l.handshake();
    const uint8_t ping[8] = {'a', 'l', 'i', 'v', 'e', '?', 0, uint8_t(board)};
    l.send(wire::MsgType::Probe, 0, 0, ping, sizeof ping, wire::kFlagLast, 0);
    const Frame f = l.recv();
    if (f.h.type != wire::MsgType::ProbeReply || f.payload != std::vector<uint8_t>(ping, ping + sizeof ping)) {
      *why = l.who() + ": wrong answer to a probe";
      return false;
    }
    l.close();
    return true;
  } catch (const std::exception& e) {
    *why = e.what();
    if (timed_out) *timed_out = std::string(e.what()).find("within") != std::string::npos;
    return false;
  }
}

// Makes `next` the swarm's plan on the boards in alive_: a new generation, a
// coordinator on fresh links, handshake and deploy (only what changed goes,
// the boards' hash cache). Used by failover and rejoin; a board failing on
// the way throws BoardError.
DeployResult Swarm::install(std::unique_ptr<plan::Plan> next) {
  plan_ = std::move(next);
  ++generation_;
  return connect_and_deploy();
}

DeployResult Swarm::connect_and_deploy() {
  last_used_ = Clock::now();
  CoordOptions copt;
  copt.timeout = opt_.timeout;
  copt.progress = opt_.progress;
  coord_ = std::make_unique<Coordinator>(q_, *plan_, connect(alive_), copt);
  coord_->handshake();
  return deploy_held();
}

DeployResult Swarm::deploy_held() {
  held_.resize(tb_.boards.size());
  std::vector<HeldFragment> h;
  for (int b : alive_) h.push_back(held_[size_t(b)]);
  auto keep = [&] {
    for (size_t w = 0; w < alive_.size(); ++w) held_[size_t(alive_[w])] = h[w];
  };
  try {
    const DeployResult r = coord_->deploy(&h);
    keep();
    return r;
  } catch (...) {
    keep();  // the boards that committed hold their new fragment
    throw;
  }
}

void Swarm::recover(const BoardError& first, int inference) {
  const auto t0 = Clock::now();
  const size_t first_event = events_.size();
  std::string cause = first.what();
  int named = first.board;
  int layer = first.layer;
  note(cause);
  for (;;) {
    // Every link closed: each board drops what it was doing.
    if (coord_) coord_->close();
    coord_.reset();
    std::vector<std::string> why(alive_.size());
    std::vector<char> ok(alive_.size(), 0);
    {
      std::vector<std::thread> checks;
      for (size_t k = 0; k < alive_.size(); ++k)
        checks.emplace_back([this, k, &ok, &why] { ok[k] = healthy(alive_[k], &why[k]) ? 1 : 0; });
      for (auto& t : checks) t.join();
    }
    std::vector<int> drop;
    std::vector<std::string> reasons;
    for (size_t k = 0; k < alive_.size(); ++k)
      if (!ok[k]) {
        drop.push_back(alive_[k]);
        reasons.push_back(alive_[k] == named ? cause : why[k]);
      }
    if (drop.empty()) {
      // Every board answers: the one the error named is the one at fault.
      if (named < 0 || std::find(alive_.begin(), alive_.end(), named) == alive_.end()) throw Error(cause);
      drop.push_back(named);
      reasons.push_back(cause);
    }
    for (size_t k = 0; k < drop.size(); ++k) {
      if (drop[k] != named) note("health check: " + reasons[k]);
      alive_.erase(std::find(alive_.begin(), alive_.end(), drop[k]));
      backoff_.resize(tb_.boards.size());
      backoff_.dropped(drop[k], inference);
      FailoverEvent ev;
      ev.board = drop[k];
      ev.board_id = tb_.boards[size_t(drop[k])].id;
      ev.address = addr_[size_t(drop[k])];
      ev.layer = layer;
      if (inference == 0 && size_t(drop[k]) < opt_.fault_layer.size() && opt_.fault_layer[size_t(drop[k])] >= 0)
        ev.layer = opt_.fault_layer[size_t(drop[k])];
      if (ev.layer >= 0 && size_t(ev.layer) < q_.nodes.size()) ev.layer_name = q_.nodes[size_t(ev.layer)].name;
      ev.reason = reasons[k];
      ev.inference = inference;
      events_.push_back(ev);
    }
    if (alive_.empty())
      throw Error("failover: no board left (" + board_list(drop) + " failed): " + cause);
    note("dropped " + board_list(drop) + "; re-planning on " + board_list(alive_));
    std::unique_ptr<plan::Plan> next;
    try {
      next = std::make_unique<plan::Plan>(plan::make_plan(q_, sub_testbed(), popt_));
    } catch (const Error& e) {
      throw Error("failover: the " + (alive_.size() > 1 ? std::to_string(alive_.size()) + " boards" : std::string("board")) +
                  " left (" + board_list(alive_) + ") cannot run the model: " + e.what() + "; after " + cause);
    }
    DeployResult dep;
    try {
      dep = install(std::move(next));
    } catch (const BoardError& e) {
      // Another board failed while the swarm was being rebuilt: next round.
      cause = e.what();
      named = e.board;
      layer = -1;
      note(cause);
      continue;
    }
    for (size_t k = first_event; k < events_.size(); ++k) {
      events_[k].recover_s = seconds_since(t0);
      events_[k].boards_left = int(alive_.size());
      events_[k].redeployed_bytes = dep.bytes;
      events_[k].full_deploy_bytes = dep.full_bytes;
    }
    last_deploy_ = dep;
    note("recovered in " + std::to_string(seconds_since(t0)).substr(0, 5) + " s; " + std::to_string(alive_.size()) +
         " boards, " + std::to_string(dep.bytes) + " fragment bytes re-deployed");
    flush_notes();
    return;
  }
}

DeployResult Swarm::deploy() {
  last_used_ = Clock::now();
  try {
    return deploy_held();
  } catch (const BoardError& e) {
    if (!failover_applies()) throw;
    recover(e, -1);
    return last_deploy_;
  }
}

void RejoinBackoff::resize(size_t boards) {
  at_.resize(boards, 0);
  step_.resize(boards, 1);
  drops_.resize(boards, 0);
}

void RejoinBackoff::dropped(int board, int inference) {
  const size_t b = size_t(board);
  step_[b] = 1 << std::min(drops_[b], 6);  // 1, 2, 4, ... 64 inferences
  ++drops_[b];
  at_[b] = inference + step_[b];  // inference -1: dropped at deploy, checked before the first
}

void RejoinBackoff::check_timed_out(int board, int inference) {
  const size_t b = size_t(board);
  step_[b] = std::min(step_[b] * 2, kMaxWait);
  at_[b] = inference + step_[b];
}

bool Swarm::rejoin_now() {
  try {
    try_rejoin(inferences_, true);
  } catch (const Error&) {
    return false;  // a board failed on the way and no re-plan holds the model
  }
  return coord_ != nullptr;
}

void Swarm::try_rejoin(int inference, bool now) {
  backoff_.resize(tb_.boards.size());
  std::vector<int> back;
  for (size_t b = 0; b < tb_.boards.size(); ++b) {
    if (std::find(alive_.begin(), alive_.end(), int(b)) != alive_.end() || !(now || backoff_.due(int(b), inference)))
      continue;
    // An idle live board answers in milliseconds: a short limit keeps a board
    // that hangs from costing much (and its wait doubles).
    std::string why;
    bool slow = false;
    if (healthy(int(b), &why, std::chrono::milliseconds(500), &slow))
      back.push_back(int(b));
    else if (slow)
      backoff_.check_timed_out(int(b), inference);
  }
  if (back.empty()) return;
  const auto t0 = Clock::now();
  std::vector<int> next_alive = alive_;
  next_alive.insert(next_alive.end(), back.begin(), back.end());
  std::sort(next_alive.begin(), next_alive.end());
  const std::vector<int> before = alive_;
  alive_ = next_alive;
  std::unique_ptr<plan::Plan> next;
  try {
    next = std::make_unique<plan::Plan>(plan::make_plan(q_, sub_testbed(), popt_));
  } catch (const Error&) {
    alive_ = before;  // cannot plan with it (should not happen: more boards): carry on without
    return;
  }
  if (coord_) coord_->close();
  coord_.reset();
  DeployResult dep;
  try {
    dep = install(std::move(next));
  } catch (const BoardError& e) {
    // A board failed while the swarm was being rebuilt: the usual recovery.
    recover(e, inference);
    return;
  }
  for (int b : back) {
    RejoinEvent ev;
    ev.board = b;
    ev.board_id = tb_.boards[size_t(b)].id;
    ev.address = addr_[size_t(b)];
    ev.inference = inference;
    ev.boards = int(alive_.size());
    ev.rejoin_s = seconds_since(t0);
    ev.redeployed_bytes = dep.bytes;
    ev.full_deploy_bytes = dep.full_bytes;
    rejoins_.push_back(ev);
    note("board " + std::to_string(b) + " (" + addr_[size_t(b)] + ") answers again: rejoined before inference " +
         std::to_string(inference) + "; " + std::to_string(alive_.size()) + " boards");
  }
  flush_notes();
}

int Swarm::resumable(const std::vector<std::vector<int8_t>>& reference, int from, int* held_by) const {
  *held_by = -1;
  if (!coord_) return from;
  const auto expected = reference_digests(q_, *plan_, reference);
  int w = -1;
  const int prefix = verified_prefix(expected, coord_->last_progress(), from, &w);
  if (w >= 0 && size_t(w) < alive_.size()) *held_by = alive_[size_t(w)];
  // The last layer always runs (its output goes to the coordinator).
  return std::min(prefix, int(q_.nodes.size()) - 1);
}

void Swarm::relink() {
  if (coord_) coord_->close();
  coord_.reset();
  try {
    connect_and_deploy();
  } catch (const BoardError& e) {
    if (!failover_applies()) throw;
    recover(e, inferences_ - 1);
  }
}

InferenceResult Swarm::infer(const std::vector<int8_t>& input, const std::vector<std::vector<int8_t>>* reference) {
  const int k = inferences_++;
  if (opt_.relink_after.count() > 0) {
    auto after = opt_.relink_after;
    const auto idle = coord_ ? coord_->board_idle_limit() : std::chrono::milliseconds(0);
    if (idle.count() > 0) after = std::min(after, idle / 2);
    if (Clock::now() - last_used_ > after) relink();
  }
  if (failover_applies() && alive_.size() < tb_.boards.size()) try_rejoin(k);
  int from = 0;
  for (;;) {
    try {
      InferenceResult r = coord_->resume(input, ResumePoint{from, reference});
      last_used_ = Clock::now();
      return r;
    } catch (const BoardError& e) {
      if (!failover_applies()) throw;
      int held_by = -1;
      if (reference) from = resumable(*reference, from, &held_by);
      const size_t first_event = events_.size();
      recover(e, k);  // re-planned and deployed on the boards left, or throws
      // A streamed chain of the new plan runs whole (core/stream.h), and a
      // view reads in-place outputs where they sit (plan.h resume_start):
      // the inference goes on from the layer that starts them.
      const int kept = from;
      from = plan::resume_start(*plan_, from);
      for (size_t i = first_event; i < events_.size(); ++i) {
        events_[i].resumed_at = from;
        events_[i].kept_layers = kept;
        events_[i].kept_held_by = held_by;
      }
    }
  }
}

void Swarm::infer_pipelined(const std::vector<const std::vector<int8_t>*>& inputs, int window,
                            const std::function<void(int, InferenceResult&)>& done) {
  const int k0 = inferences_;
  inferences_ += int(inputs.size());
  // Inferences finish in order (done(k) after done(k - 1)): after a
  // failover the batch goes on from the first one not finished, on the
  // boards left.
  size_t finished = 0;
  while (finished < inputs.size()) {
    const size_t from = finished;
    const std::vector<const std::vector<int8_t>*> rest(inputs.begin() + long(from), inputs.end());
    try {
      coord_->infer_pipelined(rest, window, [&](int j, InferenceResult& r) {
        done(int(from) + j, r);
        finished = from + size_t(j) + 1;
      });
      return;
    } catch (const BoardError& e) {
      if (!failover_applies()) throw;
      recover(e, k0 + int(finished));
    }
  }
}

}  // namespace ts::coord
