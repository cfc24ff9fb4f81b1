// tinysplit inspect: per-layer table of a model.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "model/fold.h"
#include "model/pipeline.h"

namespace ts::cli {

namespace {

struct Rf {
  int size = 1;   // receptive field edge in input pixels
  int jump = 1;   // distance in input pixels between neighbouring outputs
};

// Receptive field per tensor, propagated in topological order.
std::vector<Rf> receptive_fields(const Graph& g) {
  std::vector<Rf> rf(g.tensors.size());
  const int in_edge = std::max(g.shape(g.input).h, g.shape(g.input).w);
  for (const Node& n : g.nodes) {
    Rf r = rf[n.inputs[0]];
    for (int t : n.inputs) {
      r.size = std::max(r.size, rf[t].size);
      r.jump = std::max(r.jump, rf[t].jump);
    }
    switch (n.op) {
      case Op::Conv:
      case Op::AvgPool:
      case Op::MaxPool: {
        const int k = std::max((n.kh - 1) * n.dh, (n.kw - 1) * n.dw);
        r.size += k * r.jump;
        r.jump *= std::max(n.sh, n.sw);
        break;
      }
      case Op::GlobalAvgPool:
      case Op::Gemm:
        r.size = in_edge;
        break;
      default:
        break;
    }
    r.size = std::min(r.size, in_edge);
    rf[n.output] = r;
  }
  return rf;
}

}  // namespace

struct InspectOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  bool raw = false, json = false;
};

int cmd_inspect(const InspectOptions& opt) {
  Graph g = import_model(opt.model, opt.size);
  if (!opt.raw) g = fold(g);
  const auto rf = receptive_fields(g);
  int64_t total_macs = 0, total_params = 0, total_bytes = 0;
  nlohmann::json layers = nlohmann::json::array();
  if (!opt.json)
    std::printf("%-34s %-13s %-12s %-12s %10s %12s %10s %6s\n", "layer", "op", "input", "output", "params",
                "MACs", "out bytes", "RF");
  for (const Node& n : g.nodes) {
    const Shape& o = g.shape(n.output);
    const int64_t macs = node_macs(g, n), params = node_params(n);
    total_macs += macs;
    total_params += params;
    total_bytes += o.size();
    std::string op = op_name(n.op);
    if (n.op == Op::Conv && n.groups > 1)
      op = n.groups == g.shape(n.inputs[0]).c ? "DWConv" : "GConv";
    if (n.act == Act::Relu) op += "+relu";
    if (n.act == Act::Relu6) op += "+relu6";
    if (n.act == Act::Clip) op += "+clip";
    const Rf& r = rf[n.output];
    if (opt.json) {
      layers.push_back({{"name", n.name}, {"op", op}, {"input_shape", {g.shape(n.inputs[0]).c, g.shape(n.inputs[0]).h, g.shape(n.inputs[0]).w}},
                        {"output_shape", {o.c, o.h, o.w}}, {"params", params}, {"macs", macs},
                        {"output_bytes", o.size()}, {"receptive_field", r.size}});
    } else {
      std::printf("%-34.34s %-13s %-12s %-12s %10lld %12lld %10lld %6d\n", n.name.c_str(), op.c_str(),
                  to_string(g.shape(n.inputs[0])).c_str(), to_string(o).c_str(), (long long)params,
                  (long long)macs, (long long)o.size(), r.size);
    }
  }
  if (opt.json) {
    nlohmann::json j = {{"model", opt.model}, {"size", g.shape(g.input).h}, {"folded", !opt.raw},
                        {"total_macs", total_macs}, {"total_params", total_params},
                        {"total_output_bytes", total_bytes}, {"layers", layers}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("total: %zu layers, %lld params, %.2f M MACs, %lld activation bytes (int8)\n", g.nodes.size(),
                (long long)total_params, double(total_macs) / 1e6, (long long)total_bytes);
  }
  return 0;
}

void register_inspect(CLI::App& app) {
  auto o = std::make_shared<InspectOptions>();
  CLI::App& sub = add_command(app, "inspect",
                              "Print per-layer ops, shapes, parameters, MACs, output bytes and receptive fields",
                              [o] { return cmd_inspect(*o); });
  add_model_options(sub, o->model, o->size, false);
  sub.add_flag("--raw", o->raw, "show the imported graph before folding");
  add_json_flag(sub, o->json);
}

}  // namespace ts::cli
