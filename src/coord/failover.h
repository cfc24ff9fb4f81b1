// Failover: a swarm of boards that survives losing some of them.
//
// Swarm wraps the Coordinator. When a board dies, hangs or garbles frames
// (any BoardError) during deploy or an inference, it
//   1. closes every link (each board drops the work in progress),
//   2. checks every board still in use: a fresh connection, its HELLO and a
//      PROBE echo, each within min(timeout, 3 s),
//   3. drops the boards that fail the check; if all pass, drops the board the
//      error named (a board that only reported a dead peer is kept when the
//      check finds the dead one),
//   4. re-plans the whole model on the boards left (the same planner, cost
//      model and RAM/flash limits), connects, deploys (a board gets a patch
//      of the fragment it holds: coord/fragment_patch.h), and
//   5. resumes the failed inference from the first layer that some board
//      had not finished and verified (Coordinator::resume: the inputs of
//      the layers after it that earlier ones made come from the verified
//      reference tensors), or runs it again from its first layer when
//      nothing was verified or no reference was given.
// Before each later inference, a dropped board that answers again at its
// address (a fresh connection, HELLO and a PROBE echo) rejoins: the model is
// re-planned on the boards in use plus it and deployed (try_rejoin).
// Every deploy after the first sends each board a patch of the fragment it
// holds where that is smaller (only what changed travels).
// Every step waits with a deadline, and every round drops at least one
// board, so it ends: with a result that the caller still checks against the
// reference, or with one ts::Error line saying why the boards left cannot
// run the model (none left, or not enough RAM/flash on those left).
// With failover off the first BoardError goes to the caller unchanged.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "coord/coordinator.h"
#include "net/keyfile.h"
#include "net/link_shaper.h"
#include "plan/plan.h"
#include "plan/testbed.h"

namespace ts::coord {

// When a dropped board is checked again, before an inference. A board's
// first drop: at the next inference. Each drop after that (it rejoined and
// failed again) doubles its wait, 2, 4, ... up to 64 inferences, and so does
// each check that timed out (a board that hangs costs a short wait now and
// then, not one per inference). A check refused at once (the board is down)
// is tried again at the next inference. Within one run a board's drops are
// never forgotten: a board that flaps costs a few failovers, not one per
// inference.
class RejoinBackoff {
 public:
  static constexpr int kMaxWait = 64;
  void resize(size_t boards);
  void dropped(int board, int inference);
  bool due(int board, int inference) const { return inference >= at_[size_t(board)]; }
  void check_timed_out(int board, int inference);
  int wait(int board) const { return step_[size_t(board)]; }  // inferences, as last set

 private:
  std::vector<int> at_, step_, drops_;
};

struct SwarmOptions {
  std::chrono::milliseconds timeout{10000};  // longest wait for a board
  uint16_t window = 32;                      // frames in flight (as the boards were started)
  bool progress = false;                     // deploy progress bar; failover notes on stderr
  bool failover = true;                      // false: fail fast on the first board failure
  bool auth = false;                         // authenticated links (core/auth.h) keyed by `key`
  net::Key key{};
  // Per testbed board: the layer of a failure injected into it (`run
  // --inject-fault kill|stall|corrupt:BOARD:LAYER`, which acts in the first
  // inference), else -1; may be empty. A failover of the first inference
  // that drops such a board names that layer, the one the board failed at:
  // the error the coordinator sees may come from a peer at another layer.
  std::vector<int> fault_layer;
  // `run --emulate`: the coordinator's link, paced as the simulator models it
  // (net/link_shaper.h), shared by its links to every board. nullptr = off.
  std::shared_ptr<net::LinkShaper> link;
  // An inference after the swarm was idle this long opens its links again
  // first (handshake; every board still holds its fragment, so the deploy
  // sends nothing), so that a board's idle limit (`worker --idle-timeout`,
  // 60 s by default), which closes a silent coordinator link, never looks
  // like a failure. Boards tell their idle limit in HELLO: the links are
  // opened again after half the smallest one if that comes first. 0 = never.
  std::chrono::milliseconds relink_after{20000};
};

// One board dropped from the swarm.
struct FailoverEvent {
  int board = -1;           // testbed index
  int board_id = -1;        // Board::id
  std::string address;
  // Layer (node) of the failure, -1 outside a layer: for a board with an
  // injected fault (SwarmOptions::fault_layer) in the first inference, the
  // layer it was made to fail at; else the layer the coordinator was waiting
  // on for the board (with --route direct, for a board a peer reported lost,
  // the layer the coordinator was waiting on for that board).
  int layer = -1;
  std::string layer_name;
  std::string reason;       // what happened (one line)
  int inference = -1;       // which inference (0-based count); -1 = during the first deploy
  int boards_left = 0;      // boards in use after the re-plan
  double recover_s = 0;     // failure seen -> boards left re-planned and deployed
  int64_t redeployed_bytes = 0;  // fragment bytes sent by that re-deploy (patches and whole fragments)
  int64_t full_deploy_bytes = 0;  // the re-plan's fragments whole: what sending them all would take
  int resumed_at = 0;       // the layer the interrupted inference went on from (0: from the start)
  // Layers of the interrupted inference whose outputs were verified before
  // the failure and kept. resumed_at is this, or the first layer of the new
  // plan's streamed chain holding it (a chain runs whole).
  int kept_layers = 0;
  // Testbed index of the board whose report of layer kept_layers was missing
  // (or wrong): the board that held the resume point back. -1: none (no
  // layer kept beyond those verified before, or no reference to check).
  int kept_held_by = -1;
};

// A dropped board taken back (it answered again at its address).
struct RejoinEvent {
  int board = -1;           // testbed index
  int board_id = -1;
  std::string address;
  int inference = -1;       // the inference it was back for (0-based count)
  int boards = 0;           // boards in use after the re-plan
  double rejoin_s = 0;      // check, re-plan and deploy
  int64_t redeployed_bytes = 0;
  int64_t full_deploy_bytes = 0;
};

class Swarm {
 public:
  // `addresses` are host:port of every testbed board (BoardSet::addresses);
  // `initial` is the plan for all of them.
  Swarm(const QGraph& q, const plan::Testbed& tb, const plan::PlanOptions& popt, std::vector<std::string> addresses,
        const plan::Plan& initial, SwarmOptions opt);
  ~Swarm();
  Swarm(const Swarm&) = delete;
  Swarm& operator=(const Swarm&) = delete;

  // Connects to every board and reads its HELLO (no failover: a board that
  // cannot be reached at the start is a set-up error). A board whose links
  // the testbed does not give (its kind's assumed) and that told another
  // number takes the told one, and the swarm re-plans (testbed(), plan(),
  // links_learned()).
  void start();
  // Boards (testbed index) whose links start() learned from their HELLO.
  const std::vector<int>& links_learned() const { return learned_; }
  // Link measurement of plan worker `w` (before deploy).
  ProbeResult probe(int w);
  // New board numbers (e.g. measured links) for the boards in use: re-plan.
  void replan(const plan::Testbed& tb);
  DeployResult deploy();
  // With `reference` (run_int8_all of the input: what the digests are
  // checked against), an inference a failover interrupts resumes from the
  // layers every board had finished and verified; without, it starts again.
  InferenceResult infer(const std::vector<int8_t>& input, const std::vector<std::vector<int8_t>>* reference = nullptr);
  // Coordinator::infer_pipelined on the boards in use (direct route). A
  // board failure re-plans on the boards left (as infer) and the batch goes
  // on from its first inference not finished; without failover, or when no
  // re-plan holds the model, it ends the batch with the error.
  void infer_pipelined(const std::vector<const std::vector<int8_t>*>& inputs, int window,
                       const std::function<void(int, InferenceResult&)>& done);
  void close();
  // After the swarm could not go on (a failover with no board left, or with
  // boards left that cannot hold the model): takes back its dropped boards
  // that answer again now (rejoins()), and tells whether it runs again.
  bool rejoin_now();

  const plan::Plan& plan() const { return *plan_; }
  const plan::Testbed& testbed() const { return tb_; }
  // Testbed index of each plan worker (plan worker w is board boards()[w]).
  const std::vector<int>& boards() const { return alive_; }
  const std::vector<FailoverEvent>& failovers() const { return events_; }
  const std::vector<RejoinEvent>& rejoins() const { return rejoins_; }
  // Counts the plans the swarm has run (a failover or a rejoin re-plans).
  int plan_generation() const { return generation_; }

 private:
  DeployResult install(std::unique_ptr<plan::Plan> next);
  // A coordinator on fresh links to the boards in use, handshake and deploy
  // of the current plan.
  DeployResult connect_and_deploy();
  // Coordinator::deploy on the boards in use, with what each is known to hold.
  DeployResult deploy_held();
  std::vector<std::unique_ptr<BoardLink>> connect(const std::vector<int>& boards);
  bool healthy(int board, std::string* why, std::chrono::milliseconds limit = std::chrono::milliseconds(3000),
               bool* timed_out = nullptr);
  // Before an inference: boards dropped earlier that answer again at their
  // address are taken back (re-plan on all boards in use, deploy); each is
  // checked when its back-off is due, or now with `now`.
  void try_rejoin(int inference, bool now = false);
  // With SwarmOptions::auth, makes the link's session authenticated under a
  // fresh nonce (every connection, the first and those after a failover).
  void secure(BoardLink& l) const;
  bool failover_applies() const;
  plan::Testbed sub_testbed() const;
  void recover(const BoardError& first, int inference);
  // Fresh links to the boards in use, the plan unchanged (relink_after).
  void relink();
  // After a failure of the inference in progress on the current plan: the
  // layer it can resume from (layers before `from` were verified earlier);
  // *held_by: the testbed index of the board whose report of that layer is
  // missing or wrong (-1: none).
  int resumable(const std::vector<std::vector<int8_t>>& reference, int from, int* held_by) const;
  void note(const std::string& line);
  void flush_notes();
  std::vector<std::string> notes_;

  const QGraph& q_;
  std::vector<int> learned_;  // links_learned()
  plan::Testbed tb_;
  plan::PlanOptions popt_;
  std::vector<std::string> addr_;
  SwarmOptions opt_;
  std::vector<int> alive_;
  std::unique_ptr<plan::Plan> plan_;
  std::unique_ptr<Coordinator> coord_;
  std::vector<FailoverEvent> events_;
  std::vector<RejoinEvent> rejoins_;
  RejoinBackoff backoff_;  // per testbed board: when a dropped board is checked again
  int generation_ = 0;
  DeployResult last_deploy_;
  // Per testbed board: the fragment it was last seen to commit (a re-deploy
  // patches against it), or null.
  std::vector<HeldFragment> held_;
  int inferences_ = 0;
  std::chrono::steady_clock::time_point last_used_ = std::chrono::steady_clock::now();
};

}  // namespace ts::coord
