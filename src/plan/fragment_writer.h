// Writes a worker's fragment (core/fragment.h) from a Plan.
//
// Byte layout (little-endian; docs/planner.md has the same table):
//
//   header, kFragHeaderBytes = 32
//     0 u32 magic "TSFG"      4 u16 version     6 u16 worker (plan index)
//     8 u16 n_workers        10 u16 reserved 0  12 u32 plan_id
//    16 u32 n_layers         20 u32 total_bytes 24 u32 arena_bytes (peak)
//    28 u32 entry_bytes (= kFragLayerBytes)
//   n_layers entries of kFragLayerBytes = 568, one per QGraph node in order
//     0 u8 op, 1 u8 n_inputs, 2 u8 count_include_pad, 3 u8 reserved 0
//     4 u32 node, 8 i32 run_begin, 12 i32 run_end, 16 i32 oc_base,
//    20 i32 oc_count, 24 i32 out c,h,w, 36 i32 out_zp, act_min, act_max,
//    48 i32 kh, kw, sh, sw, dh, dw, pad_t, pad_l, pad_b, pad_r, groups,
//    92 i32 left_shift, out_mult, out_shift, 104 u32 ram_bytes,
//   108 (u32 offset, u32 count) for weights (int8), bias, mult, shift
//       (int32), lut (int8); 148 u32 reserved 0,
//   152 kMaxInputs slots of 52 bytes: i32 c, h, w, zp, in_mult, in_shift,
//       box c0, c1, h0, h1, u32 runs offset, u32 n_runs, u32 expected
//   data section: per layer in order: weights, bias, mult, shift, lut, then
//     each input's runs (u32 offset, u32 count); every array starts 4-byte
//     aligned (zero padding)
//   u32 CRC-32 of every byte before it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace ts::plan {

using core::kFragHeaderBytes;
using core::kFragInputSlotBytes;
using core::kFragLayerBytes;

// Exact size of worker w's fragment (what write_fragment returns).
int64_t fragment_bytes(const QGraph& q, const Plan& p, int worker);

// The fragment of plan worker w (0 <= w < p.n_workers()). Deterministic: the
// same plan gives the same bytes. Throws ts::Error if a value does not fit
// the format (more than 65535 workers, a tensor over 2^31 elements).
std::vector<uint8_t> write_fragment(const QGraph& q, const Plan& p, int worker);

// Writes DIR/worker-<board id>.tsfg for every worker (creating DIR) and
// returns the paths. Throws ts::Error naming the file on failure.
std::vector<std::string> write_fragments(const QGraph& q, const Plan& p, const std::string& dir);

}  // namespace ts::plan
