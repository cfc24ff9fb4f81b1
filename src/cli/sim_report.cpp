// `tinysplit simulate`'s reports: --json and text (cli/cmd_simulate.cpp).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/sim_cmd.h"
#include "sim/report.h"

namespace ts::cli {

namespace {

// Where peak RAM per board stops falling, over the runs' board counts.
int flattens_at(const SimResult& r) {
  std::vector<int> nlist;
  std::vector<int64_t> peaks;
  for (const auto& run : r.runs) {
    nlist.push_back(run->workers);
    peaks.push_back(run->max_peak_ram_bytes);
  }
  return sim::flattening_point(nlist, peaks);
}

}  // namespace

void print_sim_json(const SimConfig& c, const SimResult& r) {
  const int in_size = r.q.shape(r.q.input).h;
  nlohmann::json jruns = nlohmann::json::array();
  for (const auto& run : r.runs) jruns.push_back(sim::to_json(*run, c.json_boards(run->workers)));
  nlohmann::json j = {{"model", c.model},
                      {"size", in_size},
                      {"board", c.board_label},
                      {"allocation", plan::to_string(c.alloc)},
                      {"strategy", c.strategy},
                      {"route", c.route_text},
                      {"timing", sim::to_json(c.tm)},
                      {"runs", jruns}};
  if (r.runs.size() > 1) j["ram_flattens_at"] = flattens_at(r);
  if (!r.files.empty()) j["figures"] = r.files;
  std::printf("%s\n", j.dump(2).c_str());
}

void print_sim_text(const SimConfig& c, const SimResult& res) {
  const int in_size = res.q.shape(res.q.input).h;
  const sim::TimingModel& tm = c.tm;
  char prices[160];  // the per-op figures when the board type has them, the flat one fills in for the rest
  if (tm.costs.empty())
    std::snprintf(prices, sizeof prices, "%.3g cycles/MAC", tm.cycles_per_mac);
  else
    std::snprintf(prices, sizeof prices, "per-op cycles of data/costs/%s.json (%.3g for ops without one)", tm.costs.c_str(),
                  tm.cycles_per_mac);
  std::printf("tinysplit simulate: %s at %dx%d, %s, %s allocation, strategy %s, route %s, window %d, %s%s\n",
              c.model.c_str(), in_size, in_size, c.board_label.c_str(), plan::to_string(c.alloc), c.strategy.c_str(),
              c.route_text.c_str(), tm.window, prices, tm.board_op_delay_s > 0 ? ", injected board delays" : "");
  std::vector<const sim::RunRecord*> view;
  for (const auto& r : res.runs) view.push_back(r.get());
  sim::print_summary(stdout, view);
  for (const auto& r : res.runs) {
    if (!r->route_note.empty()) std::printf("  %d boards: %s\n", r->workers, r->route_note.c_str());
    if (!r->fits) std::printf("  %d boards do not fit: %s\n", r->workers, r->budget_error.c_str());
    if (!r->throughput_mode.empty())
      std::printf("  %d boards, objective throughput: %s, %d group%s of %d board%s%s: %.1f images/s (planner's estimate %.1f)\n",
                  r->workers, r->throughput_mode.c_str(), r->groups, r->groups == 1 ? "" : "s", r->group_boards,
                  r->group_boards == 1 ? "" : "s",
                  r->idle_boards ? (", " + std::to_string(r->idle_boards) + " idle").c_str() : "", r->images_per_s,
                  r->est_images_per_s);
    if (!r->throughput_error.empty())
      std::printf("  %d boards, objective throughput: %s\n", r->workers, r->throughput_error.c_str());
  }
  if (res.runs.size() == 1) sim::print_details(stdout, *res.runs.front());
  else std::printf("peak RAM per board stops falling (within 5%% of its floor) at %d boards\n", flattens_at(res));
  for (const auto& f : res.files) std::printf("wrote %s\n", f.c_str());
}

}  // namespace ts::cli
