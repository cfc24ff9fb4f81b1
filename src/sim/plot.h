// Figures of simulated runs, drawn by gnuplot (Debian: gnuplot-nox; the SVG
// and PNG terminals need no X server). Each figure is one gnuplot script
// with its data inline (a datablock), run through `gnuplot`.
//
//   fig08_layer_ram      per-layer peak RAM of each board vs the budget (paper Fig. 8)
//   fig09_latency_split  latency = compute + communication per board count (Fig. 9)
//   fig10_comm_per_layer communication time per layer, several board counts (Fig. 10)
//   fig12_peak_ram       peak RAM per board vs number of boards (Fig. 12)
//   fig20_latency_vs_boards  latency vs boards, the runs against the paper's mode
//   fig21_wire_vs_boards     activation bytes per inference vs boards, likewise
//   fig22_throughput_vs_boards  images/s vs boards (runs with images_per_s)
#pragma once

#include <string>
#include <vector>

#include "sim/scenario.h"

namespace ts::sim {

struct FigureSet {
  std::string title;                 // e.g. "MobileNetV2 112x112, teensy41, window 1"
  // Runs in increasing worker count. Fig. 8 uses `detail` (a run that kept
  // its board details); the others use every run.
  std::vector<const RunRecord*> runs;
  const RunRecord* detail = nullptr;
  std::vector<int> figures = {8, 9, 10, 12};  // which to draw
  // Figures 20-21: the same counts in the paper's mode (neuron, relay), drawn
  // against `runs` (labelled run_label); empty = the runs alone.
  std::vector<const RunRecord*> paper_runs;
  std::string run_label = "simulated";
  bool png = false;                  // also write .png next to each .svg
  std::string prefix;                // prepended to every file name
};

// Writes the figures into `dir` (created if missing). Returns the files
// written. Throws ts::Error if gnuplot is missing or fails, or a figure
// number is unknown.
std::vector<std::string> write_figures(const std::string& dir, const FigureSet& set);

// "8,9,10,12,20,21,22" -> {8, 9, 10, 12, 20, 21, 22}; throws ts::Error on anything else.
std::vector<int> parse_figures(const std::string& spec);

}  // namespace ts::sim
