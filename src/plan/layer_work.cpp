// plan::layer_work (plan.h): a share's pieces counted on the plan, as
// core::layer_work counts them on the fragment entry the plan is written to
// (plan/fragment_writer.cpp: runs = recv, local = local, sends, and the
// partial-sum record of an active reduced share).
#include "core/layer_work.h"
#include "plan/plan.h"

namespace ts::plan {

core::LayerWork layer_work(const LayerShare& ls) {
  core::LayerWork w;
  w.active = ls.active();
  if (!w.active) return w;
  for (const InputNeed& in : ls.inputs) {
    w.recv_runs += uint32_t(in.recv.size());
    w.local_runs += uint32_t(in.local.size());
    w.net_bytes += uint64_t(in.recv_elems);
    for (const core::InputRun& r : in.local) w.local_bytes += r.count;
  }
  const bool partial = ls.psum.on;
  w.sends = uint32_t(ls.sends.size() + (partial ? ls.psum.sends.size() : 0));
  for (const core::Send& s : ls.sends) w.net_bytes += s.count;
  if (partial) {
    for (const core::Send& s : ls.psum.sends) w.net_bytes += s.count;
    w.net_bytes += uint64_t(ls.psum.recv_bytes);
  }
  w.out_bytes = uint64_t(ls.out_elems);
  return w;
}

}  // namespace ts::plan
