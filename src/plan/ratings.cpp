#include "plan/ratings.h"

#include <cmath>

#include "plan/testbed.h"
#include <sstream>

namespace ts::plan {
namespace {

using ts::plan::format_number;
std::string num(double v) { return format_number(v); }

// Shared argument check so eq. 1 and eq. 5 reject the same inputs.
void check_inputs(double f, double k1, double kc, double d, double b) {
  auto bad = [](const char* what, double v) {
    return Error(std::string("rating: ") + what + " (got " + num(v) + ")");
  };
  if (!(std::isfinite(f) && f > 0)) throw bad("clock f must be > 0 MHz", f);
  if (!(std::isfinite(k1) && k1 > 0)) throw bad("K1 must be > 0 KB/Mcycle", k1);
  if (!(std::isfinite(kc) && kc >= 0)) throw bad("Kc must be >= 0", kc);
  if (!(std::isfinite(d) && d >= 0)) throw bad("delay d must be >= 0 s/KB", d);
  if (!(std::isfinite(b) && b > 0)) throw bad("bandwidth B must be > 0 KB/s", b);
}

void check_inputs(const RatingInputs& in) {
  check_inputs(in.clock_mhz, in.k1, in.kc, in.delay_s_per_kb, in.bandwidth_kbps);
}

// Seconds per KB moved: the (d + 1/B) factor of eq. 1.
double link_s_per_kb(double d, double b) { return d + 1.0 / b; }

}  // namespace

RatingInputs rating_inputs(const Board& b, double k1, double kc) {
  RatingInputs in;
  in.clock_mhz = b.clock_mhz;
  in.k1 = k1;
  in.kc = kc;
  in.delay_s_per_kb = b.delay_s_per_kb;
  in.bandwidth_kbps = b.bandwidth_kbps;
  return in;
}

double rating_eq5(double f, double k1, double kc, double d, double b) {
  check_inputs(f, k1, kc, d, b);
  // Output in one second is K1*W with W/f + link*K1*Kc*W = 1; solved for
  // K1*W this is f*K1 / (link*f*K1*Kc + 1).
  const double fk1 = f * k1;
  return fk1 / (link_s_per_kb(d, b) * fk1 * kc + 1.0);
}

double rating_eq5(const RatingInputs& in) {
  return rating_eq5(in.clock_mhz, in.k1, in.kc, in.delay_s_per_kb, in.bandwidth_kbps);
}

double traffic_kb_eq2(double work_mcycles, double k1, double kc) {
  if (!(std::isfinite(work_mcycles) && work_mcycles >= 0))
    throw Error("rating: workload W must be >= 0 Mcycles (got " + num(work_mcycles) + ")");
  if (!(std::isfinite(k1) && k1 > 0)) throw Error("rating: K1 must be > 0 KB/Mcycle (got " + num(k1) + ")");
  if (!(std::isfinite(kc) && kc >= 0)) throw Error("rating: Kc must be >= 0 (got " + num(kc) + ")");
  return k1 * kc * work_mcycles;
}

TimeTerms time_terms_eq1(double work_mcycles, const RatingInputs& in) {
  check_inputs(in);
  TimeTerms t;
  t.compute_s = work_mcycles / in.clock_mhz;
  t.comm_s = link_s_per_kb(in.delay_s_per_kb, in.bandwidth_kbps) *
             traffic_kb_eq2(work_mcycles, in.k1, in.kc);
  return t;
}

double time_eq1(double work_mcycles, const RatingInputs& in) {
  return time_terms_eq1(work_mcycles, in).total();
}

double kc_from_traffic(double bytes_moved, double output_bytes) {
  if (!(std::isfinite(output_bytes) && output_bytes > 0))
    throw Error("Kc: output bytes must be > 0 (got " + num(output_bytes) + ")");
  if (!(std::isfinite(bytes_moved) && bytes_moved >= 0))
    throw Error("Kc: bytes moved must be >= 0 (got " + num(bytes_moved) + ")");
  return bytes_moved / output_bytes;
}

Allocation parse_allocation(const std::string& name) {
  if (name == "even") return Allocation::Even;
  if (name == "frequency") return Allocation::Frequency;
  if (name == "rating") return Allocation::Rating;
  throw Error("unknown allocation '" + name + "' (expected even, frequency or rating)");
}

const char* to_string(Allocation a) {
  switch (a) {
    case Allocation::Even: return "even";
    case Allocation::Frequency: return "frequency";
    case Allocation::Rating: return "rating";
  }
  return "?";
}

std::vector<double> compute_ratings(const Testbed& t, Allocation how, double k1,
                                    const std::vector<double>& kc, const std::vector<double>& k1_scale) {
  validate_testbed(t, "testbed");
  const size_t n = t.boards.size();
  if (!kc.empty() && kc.size() != 1 && kc.size() != n)
    throw Error("ratings: got " + std::to_string(kc.size()) + " Kc values for " +
                std::to_string(n) + " boards (give 1 or one per board)");
  if (!k1_scale.empty() && k1_scale.size() != n)
    throw Error("ratings: got " + std::to_string(k1_scale.size()) + " K1 factors for " + std::to_string(n) + " boards");

  std::vector<double> r(n);
  for (size_t i = 0; i < n; ++i) {
    const Board& b = t.boards[i];
    switch (how) {
      case Allocation::Even: r[i] = 1.0; break;
      case Allocation::Frequency: r[i] = b.clock_mhz; break;
      case Allocation::Rating: {
        double kci = kc.empty() ? kDefaultKc : kc.size() == 1 ? kc[0] : kc[i];
        r[i] = rating_eq5(rating_inputs(b, k1_scale.empty() ? k1 : k1 * k1_scale[i], kci));
        break;
      }
    }
  }
  return r;
}

}  // namespace ts::plan
