#include "sim/plot.h"
#include "util/atomic_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace ts::sim {

namespace fs = std::filesystem;

namespace {

std::string num(double v) {
  if (!std::isfinite(v)) return "NaN";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// Text safe inside a gnuplot double-quoted string.
std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

double kib(int64_t b) { return double(b) / 1024.0; }

// Whether gnuplot wrote the whole figure: gnuplot exits 0 even when the disk
// filled up under it. An SVG ends with its closing tag, a PNG with its IEND
// chunk.
bool figure_complete(const std::string& path, const std::string& ext) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  const std::streamoff tail = std::min<std::streamoff>(size, 64);
  if (tail <= 0) return false;
  std::string end(size_t(tail), '\0');
  f.seekg(size - tail);
  f.read(end.data(), tail);
  if (!f) return false;
  if (ext == "svg") return end.find("</svg>") != std::string::npos;
  if (ext == "png") return end.size() >= 8 && end.compare(end.size() - 8, 8, std::string("IEND\xAE\x42\x60\x82", 8)) == 0;
  return true;
}

// Runs gnuplot on `body` once per terminal. Returns the files written.
std::vector<std::string> render(const std::string& dir, const std::string& name, const std::string& body, bool png,
                                int width = 960, int height = 540) {
  std::vector<std::string> files;
  struct Term {
    std::string ext, line;
  };
  std::vector<Term> terms = {{"svg", "set terminal svg size " + std::to_string(width) + "," + std::to_string(height) +
                                         " dynamic noenhanced font 'Helvetica,13' background rgb 'white'"}};
  if (png)
    terms.push_back({"png", "set terminal pngcairo size " + std::to_string(width) + "," + std::to_string(height) +
                                " noenhanced font 'Helvetica,11' background rgb 'white'"});
  for (const Term& t : terms) {
    const std::string out = (fs::path(dir) / (name + "." + t.ext)).string();
    // gnuplot writes beside the figure; the figure appears only when that
    // file is complete (commit_file_atomic: non-empty, synced, renamed).
    const std::string partial = atomic_temp_path(out);
    char script[] = "/tmp/tinysplit-plot-XXXXXX";
    const int fd = mkstemp(script);
    if (fd < 0) throw Error("plot: cannot create a temporary file");
    close(fd);
    const std::string err = std::string(script) + ".err";
    {
      std::ofstream f(script);
      f << t.line << "\nset output " << quoted(partial) << "\n" << body << "\nunset output\n";
      f.close();
      if (!f) {
        fs::remove(script);
        throw Error("plot: cannot write a temporary gnuplot script (disk full?)");
      }
    }
    const std::string cmd = "gnuplot " + std::string(script) + " 2>" + err;
    const int rc = std::system(cmd.c_str());
    std::string msg;
    {
      std::ifstream e(err);
      std::getline(e, msg);
    }
    fs::remove(script);
    fs::remove(err);
    if (rc != 0) {
      std::error_code ec;
      fs::remove(partial, ec);
      throw Error("plot: gnuplot failed on " + name + (msg.empty() ? "" : ": " + msg));
    }
    if (!figure_complete(partial, t.ext)) {
      std::error_code ec;
      fs::remove(partial, ec);
      throw Error("plot: cannot write '" + out + "': gnuplot left it incomplete (disk full?)");
    }
    commit_file_atomic(partial, out);
    files.push_back(out);
  }
  return files;
}

// `key`: where the legend goes ("outside right top", "inside right center").
std::string style_common(const std::string& key = "outside right top") {
  return "set grid ytics lc rgb '#dddddd'\n"
         "set border 3\nset tics nomirror\n"
         "set key " + key + " vertical opaque box lc rgb '#bbbbbb'\n"
         "set datafile missing 'NaN'\n";
}

// Layer names as x tics, every `every`-th layer.
std::string layer_tics(const std::vector<LayerResult>& layers, int every) {
  std::string s = "set xtics rotate by -60 font ',9' (";
  bool first = true;
  for (size_t i = 0; i < layers.size(); i += size_t(every)) {
    if (!first) s += ", ";
    first = false;
    s += quoted(layers[i].name) + " " + std::to_string(i);
  }
  return s + ")\n";
}

std::vector<std::string> fig8(const std::string& dir, const FigureSet& set) {
  const RunRecord* r = set.detail;
  if (!r || r->result.board_layers.empty()) throw Error("plot: figure 8 needs a run with board details");
  const SimResult& s = r->result;
  const size_t nb = s.board_layers.size(), nl = s.layers.size();
  const bool each = nb <= 10;
  std::ostringstream d;
  d << "$D << EOD\n";
  for (size_t n = 0; n < nl; ++n) {
    d << n;
    if (each) {
      for (size_t b = 0; b < nb; ++b) {
        const auto& bl = s.board_layers[b][n];
        d << " " << (bl.active ? num(kib(bl.peak_ram_bytes)) : "NaN");
      }
    } else {
      std::vector<double> v;
      for (size_t b = 0; b < nb; ++b)
        if (s.board_layers[b][n].active) v.push_back(kib(s.board_layers[b][n].peak_ram_bytes));
      std::sort(v.begin(), v.end());
      if (v.empty()) d << " NaN NaN NaN";
      else d << " " << num(v.front()) << " " << num(v[v.size() / 2]) << " " << num(v.back());
    }
    d << "\n";
  }
  d << "EOD\n";
  std::ostringstream g;
  g << d.str() << style_common("inside right center") << layer_tics(s.layers, 3);
  g << "set title " << quoted("Peak RAM per board per layer, " + std::to_string(nb) + " boards (" + set.title + ")")
    << "\nset ylabel 'KiB (arena high-water, fixed part included)'\nset xlabel 'layer'\n";
  g << "set xrange [-1:" << nl << "]\nset yrange [0:" << num(kib(r->ram_budget_bytes) * 1.08) << "]\n";
  g << "budget = " << num(kib(r->ram_budget_bytes)) << "\n";
  g << "plot budget with lines lw 2 dt 2 lc rgb '#cc0000' title sprintf('budget %.0f KiB', budget)";
  if (each) {
    for (size_t b = 0; b < nb; ++b)
      g << ", $D using 1:" << b + 2 << " with linespoints dt " << (b % 5) + 1 << " pt " << (b % 7) + 4
        << " ps 0.6 title 'board " << b << "'";
  } else {
    g << ", $D using 1:2:4 with filledcurves fs transparent solid 0.3 lc rgb '#4477aa' title 'min..max over boards'"
      << ", $D using 1:3 with lines lw 2 lc rgb '#4477aa' title 'median board'";
  }
  g << "\n";
  return render(dir, set.prefix + "fig08_layer_ram", g.str(), set.png);
}

std::vector<std::string> fig9(const std::string& dir, const FigureSet& set) {
  std::ostringstream d;
  d << "$D << EOD\n";
  for (const RunRecord* r : set.runs)
    d << r->workers << " " << num(r->result.compute_s) << " " << num(r->result.comm_s) << " "
      << num(r->result.total_s) << "\n";
  d << "EOD\n";
  std::ostringstream g;
  g << d.str() << style_common();
  g << "set title " << quoted("Latency of one inference: compute + communication (" + set.title + ")") << "\n";
  g << "set ylabel 'seconds'\nset xlabel 'boards'\n";
  if (set.runs.size() <= 16) {
    g << "set style data histograms\nset style histogram rowstacked\nset boxwidth 0.7\n"
         "set style fill solid 0.85 border -1\nset yrange [0:*]\n";
    g << "plot $D using 2:xtic(1) lc rgb '#4477aa' title 'compute', '' using 3 lc rgb '#ee7733' title "
         "'communication', '' using 0:4:(sprintf('%.2f s', $4)) with labels offset 0,0.8 notitle\n";
  } else {
    const bool logx = set.runs.back()->workers >= 20 * set.runs.front()->workers;
    if (logx) g << "set logscale x\n";
    g << "set yrange [0:*]\n";
    g << "plot $D using 1:4 with lines lw 2 lc rgb '#222222' title 'total', '' using 1:2 with lines lw 2 lc rgb "
         "'#4477aa' title 'compute', '' using 1:3 with lines lw 2 lc rgb '#ee7733' title 'communication'\n";
  }
  return render(dir, set.prefix + "fig09_latency_split", g.str(), set.png);
}

std::vector<std::string> fig10(const std::string& dir, const FigureSet& set) {
  // Up to six board counts spread over the runs.
  std::vector<const RunRecord*> pick;
  const size_t k = set.runs.size();
  const size_t want = std::min<size_t>(6, k);
  for (size_t i = 0; i < want; ++i) {
    const size_t at = want == 1 ? 0 : (i * (k - 1) + (want - 1) / 2) / (want - 1);
    if (pick.empty() || pick.back() != set.runs[at]) pick.push_back(set.runs[at]);
  }
  const auto& layers = pick.front()->result.layers;
  std::ostringstream d;
  d << "$D << EOD\n";
  for (size_t n = 0; n < layers.size(); ++n) {
    d << n;
    for (const RunRecord* r : pick) d << " " << num(1e3 * r->result.layers[n].comm_s);
    d << "\n";
  }
  d << "EOD\n";
  std::ostringstream g;
  g << d.str() << style_common() << layer_tics(layers, 3);
  g << "set title " << quoted("Communication time per layer (" + set.title + ")") << "\n";
  g << "set ylabel 'milliseconds'\nset xlabel 'layer'\nset xrange [-1:" << layers.size() << "]\nset yrange [0:*]\n";
  g << "plot ";
  for (size_t i = 0; i < pick.size(); ++i)
    g << (i ? ", " : "") << "$D using 1:" << i + 2 << " with linespoints pt 7 ps 0.5 lw 1.5 title '"
      << pick[i]->workers << " boards'";
  g << "\n";
  return render(dir, set.prefix + "fig10_comm_per_layer", g.str(), set.png);
}

std::vector<std::string> fig12(const std::string& dir, const FigureSet& set) {
  std::vector<int> counts;
  std::vector<int64_t> peaks;
  std::ostringstream d;
  d << "$D << EOD\n";
  for (const RunRecord* r : set.runs) {
    d << r->workers << " " << num(kib(r->max_peak_ram_bytes)) << " " << num(r->mean_peak_ram_bytes / 1024.0) << " "
      << num(kib(r->max_exact_need_bytes)) << "\n";
    counts.push_back(r->workers);
    peaks.push_back(r->max_peak_ram_bytes);
  }
  d << "EOD\n";
  const int flat = flattening_point(counts, peaks);
  std::ostringstream g;
  g << d.str() << style_common("inside right center");
  g << "set title " << quoted("Peak RAM per board vs number of boards (" + set.title + ")") << "\n";
  g << "set ylabel 'KiB'\nset xlabel 'boards'\n";
  if (set.runs.back()->workers >= 20 * set.runs.front()->workers) g << "set logscale x\n";
  g << "set yrange [0:" << num(kib(set.runs.front()->ram_budget_bytes) * 1.08) << "]\n";
  g << "budget = " << num(kib(set.runs.front()->ram_budget_bytes)) << "\n";
  if (flat > 0)
    g << "set arrow from " << flat << ", graph 0 to " << flat << ", graph 1 nohead dt 3 lc rgb '#888888'\n"
      << "set label " << quoted("within 5% of the floor from " + std::to_string(flat) + " boards") << " at " << flat
      << ", graph 0.45 offset 0.5,0 font ',10'\n";
  g << "plot budget with lines lw 2 dt 2 lc rgb '#cc0000' title sprintf('budget %.0f KiB', budget), "
       "$D using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb '#4477aa' title 'largest board (memory plan)', "
       "'' using 1:3 with linespoints pt 6 ps 0.6 lc rgb '#228833' title 'mean board (memory plan)', "
       "'' using 1:4 with linespoints pt 4 ps 0.6 lc rgb '#aa3377' title 'largest board, exact inputs only'\n";
  return render(dir, set.prefix + "fig12_peak_ram", g.str(), set.png);
}


// Figures 20-22: a quantity per board count, the runs against the paper's mode.
std::vector<std::string> vs_boards(const std::string& dir, const FigureSet& set, const std::string& file,
                                   const std::string& title, const std::string& ylabel, bool logy,
                                   double (*value)(const RunRecord&), bool with_paper = true) {
  std::ostringstream d;
  d << "$D << EOD\n";
  for (size_t i = 0; i < set.runs.size(); ++i) {
    d << set.runs[i]->workers << " " << num(value(*set.runs[i]));
    const RunRecord* p = i < set.paper_runs.size() ? set.paper_runs[i] : nullptr;
    d << " " << (p ? num(value(*p)) : std::string("NaN")) << "\n";
  }
  d << "EOD\n";
  std::ostringstream g;
  g << d.str() << style_common("below");
  g << "set title " << quoted(title + " (" + set.title + ")") << "\n";
  g << "set ylabel " << quoted(ylabel) << "\nset xlabel 'boards'\n";
  if (logy) g << "set logscale y\n";
  else g << "set yrange [0:*]\n";
  g << "plot $D using 1:2 with linespoints pt 7 ps 0.7 lw 2 lc rgb '#4477aa' title " << quoted(set.run_label);
  if (with_paper && !set.paper_runs.empty())
    g << ", '' using 1:3 with linespoints pt 5 ps 0.7 lw 2 dt 2 lc rgb '#cc6677' title 'paper mode (neuron, relay)'";
  g << "\n";
  return render(dir, set.prefix + file, g.str(), set.png);
}

double run_latency(const RunRecord& r) { return r.result.total_s; }
double run_wire_mb(const RunRecord& r) { return double(r.plan_wire_bytes) / 1e6; }
double run_images_per_s(const RunRecord& r) { return r.images_per_s > 0 ? r.images_per_s : 0.0 / 0.0; }

}  // namespace

std::vector<int> parse_figures(const std::string& spec) {
  std::vector<int> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "8" || item == "9" || item == "10" || item == "12" || item == "20" || item == "21" || item == "22")
      out.push_back(std::stoi(item));
    else throw Error("figures: '" + item + "' is not one of 8, 9, 10, 12, 20, 21, 22");
  }
  if (out.empty()) throw Error("figures: none given (use e.g. 8,9,10,12)");
  return out;
}

std::vector<std::string> write_figures(const std::string& dir, const FigureSet& set) {
  if (set.runs.empty()) throw Error("plot: nothing was simulated");
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    throw Error("plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox)");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) throw Error("plot: cannot create folder '" + dir + "'");
  std::vector<std::string> files;
  for (int f : set.figures) {
    std::vector<std::string> w;
    switch (f) {
      case 8: w = fig8(dir, set); break;
      case 9: w = fig9(dir, set); break;
      case 10: w = fig10(dir, set); break;
      case 12: w = fig12(dir, set); break;
      case 20:
        w = vs_boards(dir, set, "fig20_latency_vs_boards", "Latency of one inference vs boards", "seconds", false,
                      run_latency);
        break;
      case 21:
        w = vs_boards(dir, set, "fig21_wire_vs_boards", "Activation bytes on the wire per inference vs boards",
                      "MB per inference (log scale)", true, run_wire_mb);
        break;
      case 22:
        w = vs_boards(dir, set, "fig22_throughput_vs_boards", "Throughput vs boards (objective throughput)",
                      "images per second", false, run_images_per_s, false);
        break;
      default: throw Error("plot: unknown figure " + std::to_string(f));
    }
    files.insert(files.end(), w.begin(), w.end());
  }
  return files;
}

}  // namespace ts::sim
