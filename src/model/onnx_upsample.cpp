// ONNX Resize / Upsample / ConvTranspose -> IR nodes. See onnx_upsample.h.
#include "model/onnx_upsample.h"

#include <cmath>

#include "core/ops/resize.h"

namespace ts::onnx_import {
namespace {

namespace rs = core::resize;

int code_of(const std::string& what, const std::string& v, std::initializer_list<std::pair<const char*, int>> names) {
  for (const auto& [name, code] : names)
    if (v == name) return code;
  std::string all;
  for (const auto& [name, code] : names) all += std::string(all.empty() ? "" : ", ") + name;
  throw Fail(what + " '" + v + "' is not supported (only " + all + ")");
}

// A constant input that may be given as an empty tensor (absent).
const Const* optional_const(const ConstInput& operand, int i) {
  const Const* c = operand(i);
  return c && !c->v.empty() ? c : nullptr;
}

// Output size along one axis from a scale: only scales that give a whole
// size, so the coordinate transform's in/out ratio is the scale itself.
int64_t scaled(const char* axis, int64_t in, double s) {
  if (!(s > 0) || !std::isfinite(s)) throw Fail(std::string("scale ") + std::to_string(s) + " on " + axis + " is not positive");
  const double o = double(in) * s;
  const int64_t r = int64_t(std::llround(o));
  if (std::fabs(o - double(r)) > 1e-6 * std::max(1.0, o) || r < 1 || r > kMaxDim)
    throw Fail(std::string("scale ") + std::to_string(s) + " on " + axis + " of size " + std::to_string(in) +
               " gives a fractional or empty size (only scales giving whole sizes are supported)");
  return r;
}

}  // namespace

Node lower_resize(const OnnxNode& n, int opset, const Dims& x, const ConstInput& operand, Dims* out) {
  if (x.size() != 4) throw Fail("input shape " + dims_str(x) + " is not [1,C,H,W]");
  Node nd;
  nd.op = Op::Resize;
  const std::string mode = n.attr_s("mode", "nearest");
  nd.interp = code_of("mode", mode, {{"nearest", rs::kNearest}, {"linear", rs::kLinear}, {"bilinear", rs::kLinear}});
  const bool modern = n.op == "Resize" && opset >= 11;
  if (modern) {
    nd.coord = code_of("coordinate_transformation_mode", n.attr_s("coordinate_transformation_mode", "half_pixel"),
                       {{"asymmetric", rs::kAsymmetric},
                        {"half_pixel", rs::kHalfPixel},
                        {"align_corners", rs::kAlignCorners},
                        {"pytorch_half_pixel", rs::kPytorchHalfPixel}});
    nd.rounding = code_of("nearest_mode", n.attr_s("nearest_mode", "round_prefer_floor"),
                          {{"floor", rs::kFloor},
                           {"ceil", rs::kCeil},
                           {"round_prefer_floor", rs::kRoundPreferFloor},
                           {"round_prefer_ceil", rs::kRoundPreferCeil}});
    if (n.attr_i("exclude_outside", 0) != 0) throw Fail("exclude_outside 1 is not supported");
    if (n.attr(("antialias")) && n.attr_i("antialias", 0) != 0) throw Fail("antialias 1 is not supported");
    if (n.attr("axes")) throw Fail("the axes attribute is not supported");
    const std::string ar = n.attr_s("keep_aspect_ratio_policy", "stretch");
    if (ar != "stretch") throw Fail("keep_aspect_ratio_policy '" + ar + "' is not supported (only stretch)");
  } else {
    nd.coord = rs::kAsymmetric;  // Upsample and Resize-10: x_in = x_out / scale
    nd.rounding = rs::kFloor;
  }
  // Opset 11+: X, roi, scales, sizes; Resize-10 and Upsample-9: X, scales;
  // Upsample-7: the scales attribute.
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (n.op == "Upsample" && opset < 9) {
    for (float f : [&] {
           const Attr* a = n.attr("scales");
           if (!a) throw Fail("the scales attribute is missing");
           return a->floats;
         }())
      scales.push_back(f);
  } else {
    const int si = modern ? 2 : 1;
    if (const Const* s = optional_const(operand, si)) scales = s->v;
    if (modern)
      if (const Const* z = optional_const(operand, 3)) sizes = to_ints(*z);
  }
  Dims o = x;
  if (!sizes.empty()) {
    if (!scales.empty()) throw Fail("both scales and sizes are given");
    if (sizes.size() != 4) throw Fail("sizes " + dims_str(sizes) + " must have 4 entries");
    if (sizes[0] != x[0] || sizes[1] != x[1]) throw Fail("resizing batch or channels " + dims_str(sizes) + " is not supported");
    if (sizes[2] < 1 || sizes[3] < 1 || sizes[2] > kMaxDim || sizes[3] > kMaxDim)
      throw Fail("sizes " + dims_str(sizes) + " must be positive");
    o = sizes;
  } else {
    if (scales.size() != 4) throw Fail("scales must have 4 entries (neither scales nor sizes is given)");
    if (scales[0] != 1 || scales[1] != 1) throw Fail("scaling batch or channels is not supported");
    o[2] = scaled("H", x[2], scales[2]);
    o[3] = scaled("W", x[3], scales[3]);
  }
  if (!modern && (o[2] < x[2] || o[3] < x[3])) throw Fail("downsampling with " + n.op + " before opset 11 is not supported");
  if (modern && n.attr_s("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize")
    throw Fail("coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  nd.out_h = int(o[2]);
  nd.out_w = int(o[3]);
  *out = o;
  return nd;
}

Node lower_conv_transpose(const OnnxNode& n, const Dims& x, const Const& w, const Const* b, Dims* out) {
  if (x.size() != 4) throw Fail("input shape " + dims_str(x) + " is not [1,C,H,W]");
  if (w.dims.size() != 4) throw Fail("weights of shape " + dims_str(w.dims) + " (only 2-D is supported)");
  const int64_t C = x[1], G = n.attr_i("group", 1);
  const int64_t kh = w.dims[2], kw = w.dims[3];
  if (G < 1 || w.dims[0] != C || C % G) throw Fail("weights " + dims_str(w.dims) + " with group " + std::to_string(G) + " do not fit input " + dims_str(x));
  const int64_t cout_g = w.dims[1], cin_g = C / G, O = cout_g * G;
  if (kh < 1 || kw < 1 || kh > 1024 || kw > 1024) throw Fail("kernel " + dims_str(w.dims) + " is not supported");
  auto ks = n.attr_ints("kernel_shape");
  if (!ks.empty() && (ks.size() != 2 || ks[0] != kh || ks[1] != kw))
    throw Fail("kernel_shape " + dims_str(ks) + " disagrees with weights " + dims_str(w.dims));
  auto pair = [&](const char* name, int64_t def) {
    auto v = n.attr_ints(name);
    if (v.empty()) return std::vector<int64_t>{def, def};
    if (v.size() != 2) throw Fail(std::string("'") + name + "' must have 2 entries (only 2-D is supported)");
    return v;
  };
  const auto st = pair("strides", 1), dil = pair("dilations", 1), op = pair("output_padding", 0);
  if (dil[0] != 1 || dil[1] != 1) throw Fail("dilations " + dims_str(dil) + " are not supported (only 1)");
  if (st[0] < 1 || st[1] < 1 || st[0] > 1024 || st[1] > 1024) throw Fail("strides " + dims_str(st) + " are not supported");
  if (n.attr("output_shape")) throw Fail("the output_shape attribute is not supported (give pads)");
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && !ap.empty()) throw Fail("auto_pad '" + ap + "' is not supported");
  std::vector<int64_t> p = n.attr_ints("pads");
  if (p.empty() || ap == "VALID") p.assign(4, 0);
  if (p.size() != 4) throw Fail("'pads' must have 4 entries (only 2-D is supported)");
  for (int64_t v : p)
    if (v < 0 || v > 1024) throw Fail("'pads' " + dims_str(p) + " are not supported");
  // output_padding adds rows and columns at the end: taken off the end pads.
  if (op[0] < 0 || op[1] < 0 || op[0] > p[2] || op[1] > p[3])
    throw Fail("output_padding " + dims_str(op) + " larger than the end pads " + dims_str(p) + " is not supported");
  Node nd;
  nd.op = Op::ConvTranspose;
  nd.kh = int(kh); nd.kw = int(kw); nd.sh = int(st[0]); nd.sw = int(st[1]);
  nd.pad_t = int(p[0]); nd.pad_l = int(p[1]); nd.pad_b = int(p[2] - op[0]); nd.pad_r = int(p[3] - op[1]);
  nd.groups = int(G);
  // [ci = g*cin_g + i][oo][ky][kx] -> [o = g*cout_g + oo][i][ky][kx]
  const std::vector<float> src = to_floats(w);
  const size_t taps = size_t(kh * kw);
  nd.weights.resize(src.size());
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < cin_g; ++i)
      for (int64_t oo = 0; oo < cout_g; ++oo) {
        const float* s = src.data() + (size_t((g * cin_g + i) * cout_g + oo)) * taps;
        float* d = nd.weights.data() + (size_t((g * cout_g + oo) * cin_g + i)) * taps;
        std::copy(s, s + taps, d);
      }
  if (b) {
    if (int64_t(b->v.size()) != O) throw Fail("bias has " + std::to_string(b->v.size()) + " values for " + std::to_string(O) + " outputs");
    nd.bias = to_floats(*b);
  }
  const int64_t oh = (x[2] - 1) * st[0] + kh - nd.pad_t - nd.pad_b, ow = (x[3] - 1) * st[1] + kw - nd.pad_l - nd.pad_r;
  if (oh < 1 || ow < 1) throw Fail("the pads leave an empty output");
  *out = {1, O, oh, ow};
  return nd;
}

}  // namespace ts::onnx_import
