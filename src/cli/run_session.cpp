#include "cli/run_session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "cli/run_throughput.h"
#include "coord/boards.h"
#include "model/dataset.h"
#include "model/image.h"
#include "model/npy.h"
#include "model/pipeline.h"
#include "util/atomic_file.h"

namespace ts::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Every inference of every input, each output checked against its reference
// and every layer of every board by digest (coord/verify.h): a layer counts
// as verified when it matched on every board in every inference. Also times
// the single-process reference again, one run of the first input after each
// of its inferences, so that a load that comes and goes on a shared machine
// weighs on both figures alike. Sets `r->last` to the last inference with
// the median times.
void infer_all(const RunConfig& c, const RunInputs& in, coord::Swarm& swarm, RunResult* out) {
  RunResult& res = *out;
  const QGraph& q = in.q;
  coord::InferenceResult r;
  struct Times {
    double total, compute, comm;
  };
  std::vector<Times> times;  // every inference, for the medians
  std::vector<char> layer_ok(q.nodes.size(), 1);
  std::vector<double> ref_between;
  for (size_t i = 0; i < in.xs.size(); ++i) {
    const auto tensors = run_int8_all(q, in.xs[i]);
    std::vector<std::vector<coord::ExpectedDigest>> expected;
    int expected_for = -1;  // the swarm's plan generation `expected` was computed for
    bool same = true;
    for (int k = 0; k < c.repeat; ++k) {
      r = swarm.infer(in.xs[i], &tensors);
      times.push_back({r.total_s, r.compute_s, r.comm_s});
      if (i == 0) {
        const auto t_ref = Clock::now();
        (void)run_int8(q, in.xs[0]);
        ref_between.push_back(seconds_since(t_ref));
      }
      same = same && r.output == in.refs[i];
      ++res.inferences;
      res.exact_inferences += r.output == in.refs[i];
      // The boards' digests against the reference's over the regions of the
      // plan that ran (after a failover or a rejoin, the new plan).
      if (swarm.plan_generation() != expected_for) {
        expected = coord::reference_digests(q, swarm.plan(), tensors);
        expected_for = swarm.plan_generation();
      }
      const coord::Verification v = coord::verify_layers(expected, r);
      for (size_t n = 0; n < layer_ok.size(); ++n) layer_ok[n] = layer_ok[n] && v.layer_ok[n];
      if (!v.ok() && res.first_bad.ok()) {
        res.first_bad = v;
        res.first_bad_input = int(i);
        res.first_bad.board = swarm.boards()[size_t(v.board)];  // plan worker -> testbed board
      }
    }
    res.match = res.match && same;
    res.exact += same;
    if (!c.dataset.empty()) {
      const int y = in.labels[i];
      auto top1 = [](const std::vector<int8_t>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); };
      res.correct += top1(r.output) == y;
      res.ref_correct += top1(in.refs[i]) == y;
    }
  }
  res.verified_layers = int(std::count(layer_ok.begin(), layer_ok.end(), char(1)));
  res.match = res.match && res.first_bad.ok();
  // latency_s: the inference with the median total time over all of them
  // (per-layer figures stay those of the last inference).
  std::sort(times.begin(), times.end(), [](const Times& a, const Times& b) { return a.total < b.total; });
  const Times& med = times[times.size() / 2];
  res.reference_s = in.reference_s;
  if (!ref_between.empty()) {
    std::sort(ref_between.begin(), ref_between.end());
    res.reference_s = ref_between[ref_between.size() / 2];
  }
  r.total_s = med.total;
  r.compute_s = med.compute;
  r.comm_s = med.comm;
  res.last = std::move(r);
}

// The last input's output: the model's output as float32 (dequantised, with
// the host Softmax if the model ends in one) and the raw int8 tensor.
// With --save-overlay, the text boxes of its map (in photo pixels) after
// writing the photo with the map and the boxes over it.
std::vector<TextBox> save_outputs(const RunConfig& c, const RunInputs& in, const std::vector<int8_t>& output) {
  const QGraph& q = in.q;
  const auto probs = output_probs(q, output);
  const std::vector<int64_t> oshape = {1, int64_t(probs.size())};
  if (!c.save_output.empty()) write_npy(c.save_output, oshape, probs);
  if (!c.save_int8_output.empty()) write_npy(c.save_int8_output, oshape, output);
  std::vector<TextBox> boxes;
  if (c.save_overlay.empty()) return boxes;
  const Shape& s = q.shape(q.output);
  const ProbMap m = output_map(probs, s.c, s.h, s.w);
  const std::vector<TextBox> found = db_boxes(m);
  const Image photo = load_image(in.photo);
  write_file_atomic(c.save_overlay, overlay_png(photo, m, found));
  for (const TextBox& b : found) boxes.push_back(scale_box(b, m, photo.w, photo.h));
  return boxes;
}

}  // namespace

RunInputs load_run_inputs(const RunConfig& c) {
  RunInputs in;
  InputTensor tensor;
  LabelledImages test;
  QuantizeOptions qopt;
  if (!c.input.empty()) {
    // A bad tensor is reported before any work on the model.
    if (!is_quantized_file(resolve_model(c.model))) {
      const Graph gi = import_model(c.model, c.size);
      tensor = load_input_npy(c.input, gi.shape(gi.input));
    }
    in.input_name = std::filesystem::path(c.input).filename().string();
  } else if (!c.dataset.empty()) {
    test = load_fashion_mnist("test", c.limit > 0 ? c.limit : 100);
    qopt = fashion_mnist_calibration();
    in.input_name = "fashion-mnist test images 0.." + std::to_string(test.count() - 1);
  }
  in.q = quantized_model(c.model, c.size, qopt);
  QGraph& q = in.q;
  in.plan = c.plan;
  plan::estimate_code_ratios(q, &in.plan);
  if (!c.dataset.empty() && q.labels.empty()) q.labels = test.classes;
  const int in_size = q.shape(q.input).h;
  if (!c.input.empty()) {
    if (tensor.f32.empty() && tensor.i8.empty()) tensor = load_input_npy(c.input, q.shape(q.input));
    in.xs.push_back(int8_input(q, tensor));
  } else if (!c.dataset.empty()) {
    if (q.shape(q.input) != Shape{1, test.rows, test.cols})
      throw Error("'" + c.model + "' takes " + to_string(q.shape(q.input)) + " inputs; Fashion-MNIST images are 1x" +
                  std::to_string(test.rows) + "x" + std::to_string(test.cols));
    for (int i = 0; i < test.count(); ++i) in.xs.push_back(quantize_input(q, test.input(i)));
    in.labels.assign(test.labels.begin(), test.labels.end());
  } else {
    const std::string photo = c.image.empty() ? default_photo() : c.image;
    in.input_name = std::filesystem::path(photo).filename().string();
    in.photo = photo;
    in.xs.push_back(quantize_input(q, image_input(photo, in_size, q.in_norm)));
  }
  if (!c.save_overlay.empty()) {  // before any board starts: a model without a map is one line
    const Shape& o = q.shape(q.output);
    try {
      (void)output_map(std::vector<float>(size_t(o.c) * size_t(o.h) * size_t(o.w)), o.c, o.h, o.w);
    } catch (const Error& e) {
      throw Error("run: --save-overlay: " + std::string(e.what()));
    }
  }
  for (const auto& x : in.xs) in.refs.push_back(run_int8(q, x));
  // The single process, warm (the runs above were the warm-up): the median
  // of --repeat timed runs of the first input, in this same process (for
  // --objective throughput; one inference at a time times it again,
  // interleaved with the inferences).
  std::vector<double> ref_times;
  for (int k = 0; k < c.repeat; ++k) {
    const auto t_ref = Clock::now();
    (void)run_int8(q, in.xs[0]);
    ref_times.push_back(seconds_since(t_ref));
  }
  std::sort(ref_times.begin(), ref_times.end());
  in.reference_s = ref_times[ref_times.size() / 2];
  return in;
}

namespace {

BoardTypeEstimate estimate_on_board_type(const RunConfig& c, const QGraph& q, const RunResult& r) {
  const sim::BoardPreset& type = sim::board_preset("teensy41");
  BoardTypeEstimate e;
  e.board_type = type.name;
  sim::TimingModel tm = type.timing;
  tm.window = c.window;
  tm.protocol = c.plan.cost.type_protocol(tm.costs);  // --protocol-cpu
  plan::Testbed tb = c.testbed;  // the boards as configured (not as probed on this machine)
  tb.boards.clear();
  for (int w : r.used) tb.boards.push_back(c.testbed.boards[size_t(w)]);
  const sim::SimResult s = sim::simulate(q, r.plan, tb, tm);
  e.total_s = s.total_s;
  e.compute_s = s.compute_s;
  e.comm_s = s.comm_s;
  e.cycles_per_mac = tm.cycles_per_mac;
  e.costs = tm.costs;
  e.window = tm.window;
  const bool paper_setting = is_default_model(c.model) && q.shape(q.input).h == kPaperInputSize &&
                             r.plan.strategy == "neuron" && r.plan.route == plan::Route::Relay;
  if (paper_setting) e.paper = sim::paper_figure(r.plan.n_workers());
  return e;
}

}  // namespace

RunResult run_latency(const RunConfig& c, const RunInputs& in) {
  const QGraph& q = in.q;
  RunResult res;
  res.testbed = c.testbed;
  plan::Testbed& tb = res.testbed;
  plan::PlanOptions popt = in.plan;
  plan::Plan p = plan::make_plan_or_count(q, tb, popt);
  check_flip_faults(c.faults, q, p);
  res.cost_host = popt.cost.host;
  // Boards.
  coord::SpawnOptions so = spawn_options(c);
  std::vector<int> fault_layer;
  apply_faults(c.faults, tb, q, p, &so, &fault_layer);
  coord::BoardSet boards(tb, so);
  coord::SwarmOptions sopt = swarm_options(c);
  sopt.fault_layer = fault_layer;
  coord::Swarm swarm(q, tb, popt, boards.addresses(), p, sopt);
  swarm.start();
  for (int b : swarm.links_learned()) {
    res.links_learned.push_back({tb.boards[size_t(b)].id, plan::board_links(tb.boards[size_t(b)]),
                                 swarm.testbed().boards[size_t(b)].links});
    tb.boards[size_t(b)].links = swarm.testbed().boards[size_t(b)].links;
  }
  if (!res.links_learned.empty()) {
    p = swarm.plan();
    check_flip_faults(c.faults, q, p);
  }
  if (c.probe) {
    // Measure each link's d and B, put them in the testbed, and re-plan:
    // with the rating allocation the shares now follow measured links.
    for (int w = 0; w < p.n_workers(); ++w) res.probes.push_back(swarm.probe(w));
    for (int w = 0; w < p.n_workers(); ++w) {
      tb.boards[w].delay_s_per_kb = res.probes[w].delay_s_per_kb;
      tb.boards[w].bandwidth_kbps = res.probes[w].bandwidth_kbps;
    }
    swarm.replan(tb);
    p = swarm.plan();
    check_flip_faults(c.faults, q, p);
  }
  res.deploy = swarm.deploy();
  infer_all(c, in, swarm, &res);
  swarm.close();
  boards.stop();
  // What the last inference ran on: after a failover, fewer boards.
  res.plan = swarm.plan();
  res.used = swarm.boards();
  res.addresses = boards.addresses();
  res.failovers = swarm.failovers();
  res.rejoins = swarm.rejoins();
  res.estimate = estimate_on_board_type(c, q, res);
  return res;
}

int cmd_run(const RunConfig& c) {
  const RunInputs in = load_run_inputs(c);
  if (c.objective == plan::Objective::Throughput) return run_throughput(c, in);
  RunResult r = run_latency(c, in);
  r.text_boxes = save_outputs(c, in, r.last.output);
  if (c.json) print_run_json(c, in, r);
  else print_run_text(c, in, r);
  if (!r.first_bad.ok()) {
    std::fprintf(stderr, "tinysplit: error: %s\n",
                 coord::describe_mismatch(in.q, r.first_bad, r.addresses[size_t(r.first_bad.board)]).c_str());
    return 2;
  }
  if (!r.match) {
    std::fprintf(stderr, "tinysplit: error: the distributed result differs from the int8 reference\n");
    return 2;
  }
  return 0;
}

}  // namespace ts::cli
