// The counts of core/layer_work.h read from a fragment entry.
#include "core/layer_work.h"

#include "core/fragment.h"

namespace ts {
namespace core {

LayerWork layer_work(const FragLayer& e) {
  LayerWork w;
  w.active = e.active();
  if (!w.active) return w;
  for (int k = 0; k < kMaxInputs; ++k) {
    w.recv_runs += e.n_runs[k];
    w.local_runs += e.n_local[k];
    w.net_bytes += e.expected[k];
    for (uint32_t i = 0; i < e.n_local[k]; ++i) w.local_bytes += e.local_run(k, i).count;
  }
  w.sends = e.n_sends + e.n_ps_sends;
  for (uint32_t i = 0; i < e.n_sends; ++i) w.net_bytes += e.send(i).count;
  for (uint32_t i = 0; i < e.n_ps_sends; ++i) w.net_bytes += e.ps_send(i).count;
  w.net_bytes += e.ps_expected;
  w.out_bytes = e.out_elems;
  return w;
}

}  // namespace core
}  // namespace ts
