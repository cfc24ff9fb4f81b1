// Overlap inside a layer on the direct route (core/halo_first.h): the two
// splits of a share, worked out on the plan as the board works them out on
// its fragment entry.
#include "plan/plan.h"

namespace ts::plan {

core::HaloSplit halo_split_of(const core::LayerDesc& d, const LayerShare& ls) {
  if (!ls.active() || ls.psum.on || ls.chained) return core::HaloSplit();  // a chain is computed row by row
  return core::halo_split(d.out, uint32_t(ls.regions.size()), [&](uint32_t i) { return ls.regions[i]; },
                          uint32_t(ls.sends.size()), [&](uint32_t i) { return ls.sends[i]; });
}

double halo_second_s(const core::LayerDesc& d, const LayerShare& ls, const core::HaloSplit& hs, double s_per_mac) {
  if (!hs.on()) return 0;
  return double(ls.macs - int64_t(core::halo_macs(d, hs))) * s_per_mac;
}

core::HaloSplit inner_split_of(const core::LayerDesc& d, const LayerShare& ls) {
  // As the board (core/worker_schedule.cpp): not a reduced layer, a chain's,
  // one waiting for the coordinator's RUN, or one that sends halos first.
  if (!ls.active() || ls.psum.on || ls.chained || ls.run_trigger || halo_split_of(d, ls).on()) return core::HaloSplit();
  uint32_t n_runs[core::kMaxInputs] = {};
  for (size_t k = 0; k < ls.inputs.size() && k < size_t(core::kMaxInputs); ++k)
    n_runs[k] = uint32_t(ls.inputs[k].recv.size());
  return core::inner_split(d, uint32_t(ls.regions.size()), [&](uint32_t i) { return ls.regions[i]; }, n_runs,
                           [&](int k, uint32_t i) { return ls.inputs[size_t(k)].recv[i]; });
}

double inner_first_s(const core::LayerDesc& d, const LayerShare& ls, const core::HaloSplit& is, double s_per_mac) {
  return halo_second_s(d, ls, is, s_per_mac);  // the same positions, [q0, q1), computed first here
}

}  // namespace ts::plan
