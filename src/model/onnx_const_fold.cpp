// ONNX import, step 2: evaluating constant subgraphs. See onnx_const_fold.h.
#include "model/onnx_const_fold.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace ts::onnx_import {

const Const& need(const ConstInput& operand, int i) {
  const Const* c = operand(i);
  if (!c) throw Fail("input " + std::to_string(i) + " is missing");
  return *c;
}

int64_t norm_axis(int64_t axis, size_t rank, const char* what) {
  const int64_t r = int64_t(rank);
  if (axis < -r || axis >= r)
    throw Fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return axis < 0 ? axis + r : axis;
}

Dims reshape_target(const Dims& in, const std::vector<int64_t>& shape, bool allowzero) {
  Dims out(shape.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size()) throw Fail("Reshape copies dimension " + std::to_string(i) + " that the input lacks");
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0) throw Fail("Reshape target " + dims_str(shape) + " has two -1 entries");
      infer = int(i);
      continue;
    }
    if (d < 0) throw Fail("Reshape target " + dims_str(shape) + " has a negative size");
    out[i] = d;
    known *= d;
  }
  const int64_t total = numel(in);
  if (infer >= 0) {
    if (known == 0 || total % known) throw Fail("cannot reshape " + dims_str(in) + " to " + dims_str(shape));
    out[size_t(infer)] = total / known;
  }
  if (numel(out) != total) throw Fail("cannot reshape " + dims_str(in) + " to " + dims_str(shape));
  return out;
}

bool is_reshape_like(const std::string& op) {
  return op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze";
}

Dims reshaped_dims(const OnnxNode& n, int opset, const Dims& in, const ConstInput& operand, bool constant) {
  if (n.op == "Flatten") {
    const int64_t axis = norm_axis(n.attr_i("axis", 1), in.size() + 1);
    int64_t a = 1, b = 1;
    for (size_t i = 0; i < in.size(); ++i) (int64_t(i) < axis ? a : b) *= in[i];
    return {a, b};
  }
  if (n.op == "Reshape") return reshape_target(in, to_ints(need(operand, 1)), n.attr_i("allowzero", 0) != 0);
  // Squeeze / Unsqueeze: axes from input 1 since opset 13, an attribute before.
  const Const* axes_in = opset >= 13 ? operand(1) : nullptr;
  const std::vector<int64_t> axes = opset >= 13 ? (axes_in ? to_ints(*axes_in) : std::vector<int64_t>{})
                                                : n.attr_ints("axes");
  Dims out;
  if (n.op == "Squeeze") {
    std::set<int64_t> drop;
    for (int64_t a : axes) drop.insert(norm_axis(a, in.size()));
    for (size_t i = 0; i < in.size(); ++i) {
      const bool listed = drop.count(int64_t(i)) > 0;
      if (listed && in[i] != 1)
        throw Fail(constant ? "cannot squeeze a dimension that is not 1"
                            : "cannot squeeze axis " + std::to_string(i) + " of " + dims_str(in));
      if (!(listed || (axes.empty() && in[i] == 1))) out.push_back(in[i]);
    }
    return out;
  }
  if (axes.empty() && !constant) throw Fail("Unsqueeze needs axes");
  const size_t rank = in.size() + axes.size();
  std::vector<char> ins(rank, 0);
  for (int64_t a : axes) ins[size_t(norm_axis(a, rank))] = 1;
  size_t j = 0;
  for (size_t i = 0; i < rank; ++i) out.push_back(ins[i] ? 1 : in.at(j++));
  return out;
}

Const shape_of(const OnnxNode& n, const Dims& d) {
  Const c;
  c.is_int = true;
  if (n.op == "Size") {
    c.v = {double(numel(d))};
    return c;
  }
  int64_t r = int64_t(d.size());
  int64_t s = n.attr_i("start", 0), e = n.attr_i("end", r);
  if (s < 0) s += r;
  if (e < 0) e += r;
  s = std::clamp<int64_t>(s, 0, r);
  e = std::clamp<int64_t>(e, 0, r);
  for (int64_t i = s; i < e; ++i) c.v.push_back(double(d[size_t(i)]));
  c.dims = {int64_t(c.v.size())};
  return c;
}

namespace {

// Row-major strides of dims.
std::vector<int64_t> strides_of(const Dims& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int i = int(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

// Calls f(out_flat_index, multi_index) for every element of dims, in order.
template <typename F>
void for_each_index(const Dims& dims, F f) {
  const int64_t n = numel(dims);
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, idx);
    for (int a = int(dims.size()) - 1; a >= 0; --a) {
      if (++idx[a] < dims[a]) break;
      idx[a] = 0;
    }
  }
}

Const constant(const OnnxNode& n) {
  Const r;
  if (const Attr* a = n.attr("value")) {
    r = *a->tensor("constant");
  } else if ((a = n.attr("value_float"))) {
    r.v = {double(a->f)};
  } else if ((a = n.attr("value_floats"))) {
    r.v.assign(a->floats.begin(), a->floats.end());
    r.dims = {int64_t(r.v.size())};
  } else if ((a = n.attr("value_int"))) {
    r.is_int = true;
    r.v = {double(a->i)};
  } else if ((a = n.attr("value_ints"))) {
    r.is_int = true;
    r.v.assign(a->ints.begin(), a->ints.end());
    r.dims = {int64_t(r.v.size())};
  } else {
    throw Fail("only tensor, float and int constants are supported");
  }
  return r;
}

Const constant_of_shape(const OnnxNode& n, const Const& shape) {
  Const r;
  r.dims = to_ints(shape);
  if (numel(r.dims) > (int64_t(1) << 24)) throw Fail("ConstantOfShape " + dims_str(r.dims) + " is too large");
  double val = 0;
  if (const Attr* a = n.attr("value")) {
    auto t = a->tensor("ConstantOfShape value");
    if (t->v.size() != 1) throw Fail("ConstantOfShape value must have one element");
    val = t->v[0];
    r.is_int = t->is_int;
  }
  r.v.assign(size_t(numel(r.dims)), val);
  return r;
}

Const cast(const OnnxNode& n, Const r) {
  const int64_t to = n.attr_i("to", kOnnxFloat);
  switch (elem_kind(to)) {
    case ElemKind::Float:
      r.is_int = false;
      for (double& x : r.v) x = double(float(x));
      break;
    case ElemKind::Double:
      r.is_int = false;
      break;
    case ElemKind::Bool:
      r.is_int = true;
      for (double& x : r.v) x = x != 0 ? 1 : 0;
      break;
    case ElemKind::Int:
      r.is_int = true;
      for (double& x : r.v) x = std::trunc(x);
      break;
    default:
      throw Fail("Cast to element type " + std::to_string(to) + " is not supported");
  }
  return r;
}

Const concat(const OnnxNode& n, const ConstInput& operand) {
  std::vector<const Const*> parts;
  for (int i = 0; i < int(n.inputs.size()); ++i)
    if (const Const* p = operand(i)) parts.push_back(p);
  if (parts.empty()) throw Fail("Concat has no inputs");
  const size_t rank = parts[0]->dims.size();
  const int64_t axis = norm_axis(n.attr_i("axis", 0), rank);
  Const r;
  r.is_int = true;
  r.dims = parts[0]->dims;
  r.dims[size_t(axis)] = 0;
  for (const Const* p : parts) {
    if (p->dims.size() != rank) throw Fail("Concat inputs differ in rank");
    for (size_t a = 0; a < rank; ++a)
      if (int64_t(a) != axis && p->dims[a] != parts[0]->dims[a]) throw Fail("Concat inputs differ in shape");
    r.dims[size_t(axis)] += p->dims[size_t(axis)];
    r.is_int = r.is_int && p->is_int;
  }
  int64_t outer = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= r.dims[size_t(a)];
  for (int64_t o = 0; o < outer; ++o)
    for (const Const* p : parts) {
      const int64_t chunk = numel(p->dims) / std::max<int64_t>(outer, 1);
      r.v.insert(r.v.end(), p->v.begin() + o * chunk, p->v.begin() + (o + 1) * chunk);
    }
  return r;
}

Const gather(const OnnxNode& n, const Const& d, const Const& ix) {
  if (d.dims.empty()) throw Fail("Gather on a scalar");
  const int64_t axis = norm_axis(n.attr_i("axis", 0), d.dims.size());
  const int64_t len = d.dims[size_t(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= d.dims[size_t(a)];
  for (size_t a = size_t(axis) + 1; a < d.dims.size(); ++a) inner *= d.dims[a];
  Const r;
  r.is_int = d.is_int;
  r.dims.assign(d.dims.begin(), d.dims.begin() + axis);
  r.dims.insert(r.dims.end(), ix.dims.begin(), ix.dims.end());
  r.dims.insert(r.dims.end(), d.dims.begin() + axis + 1, d.dims.end());
  for (int64_t o = 0; o < outer; ++o)
    for (double iv : ix.v) {
      int64_t k = to_i64(iv);
      if (k < 0) k += len;
      if (k < 0 || k >= len) throw Fail("Gather index " + std::to_string(to_i64(iv)) + " is out of range");
      auto start = d.v.begin() + (o * len + k) * inner;
      r.v.insert(r.v.end(), start, start + inner);
    }
  return r;
}

}  // namespace

SliceAxes slice_axes(const OnnxNode& n, int opset, const Dims& in, const ConstInput& operand) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (opset < 10) {
    starts = n.attr_ints("starts");
    ends = n.attr_ints("ends");
    axes = n.attr_ints("axes");
  } else {
    starts = to_ints(need(operand, 1));
    ends = to_ints(need(operand, 2));
    if (operand(3)) axes = to_ints(*operand(3));
    if (operand(4)) steps = to_ints(*operand(4));
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw Fail("Slice starts/ends/axes/steps differ in length");
  const size_t rank = in.size();
  SliceAxes r;
  r.start.assign(rank, 0);
  r.step.assign(rank, 1);
  r.out = in;
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t a = size_t(norm_axis(axes[i], rank));
    const int64_t dim = in[a], step = steps[i];
    if (step == 0) throw Fail("Slice step 0");
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t cnt;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      cnt = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      cnt = s > e ? (s - e - step - 1) / -step : 0;
    }
    r.start[a] = s;
    r.step[a] = step;
    r.out[a] = cnt;
  }
  return r;
}

std::vector<int64_t> split_lengths(const OnnxNode& n, int opset, const Dims& in, int64_t axis,
                                   const ConstInput& operand) {
  const int64_t dim = in.at(size_t(axis));
  std::vector<int64_t> len = opset < 13 ? n.attr_ints("split") : (operand(1) ? to_ints(*operand(1)) : std::vector<int64_t>{});
  const int64_t parts = int64_t(n.outputs.size());
  if (len.empty()) {
    const int64_t k = n.attr_i("num_outputs", parts);
    if (k < 1 || k != parts) throw Fail("num_outputs " + std::to_string(k) + " differs from the node's " + std::to_string(parts) + " outputs");
    const int64_t each = (dim + k - 1) / k;  // the last part takes what is left
    for (int64_t i = 0; i < k; ++i) len.push_back(std::max<int64_t>(0, std::min(each, dim - i * each)));
  }
  int64_t sum = 0;
  for (int64_t l : len) {
    if (l < 0) throw Fail("negative split length " + std::to_string(l));
    sum += l;
  }
  if (int64_t(len.size()) != parts || sum != dim)
    throw Fail("split lengths " + dims_str(len) + " do not cut axis " + std::to_string(axis) + " of " + dims_str(in) +
               " into the node's " + std::to_string(parts) + " outputs");
  return len;
}

namespace {

Const slice(const OnnxNode& n, const ConstInput& operand, int opset) {
  const Const& d = need(operand, 0);
  const SliceAxes ax = slice_axes(n, opset, d.dims, operand);
  const size_t rank = d.dims.size();
  const std::vector<int64_t>& st = ax.start;
  const std::vector<int64_t>& sp = ax.step;
  const Dims& od = ax.out;
  Const r;
  r.is_int = d.is_int;
  r.dims = od;
  const auto ds = strides_of(d.dims);
  for_each_index(od, [&](int64_t, const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t a = 0; a < rank; ++a) off += (st[a] + idx[a] * sp[a]) * ds[a];
    r.v.push_back(d.v.at(size_t(off)));
  });
  return r;
}

Const transpose(const OnnxNode& n, const Const& d) {
  const size_t rank = d.dims.size();
  auto perm = n.attr_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i) perm.push_back(int64_t(rank - 1 - i));
  if (perm.size() != rank) throw Fail("Transpose perm does not match the rank");
  Const r;
  r.is_int = d.is_int;
  for (int64_t p : perm) r.dims.push_back(d.dims.at(size_t(norm_axis(p, rank))));
  const auto ds = strides_of(d.dims);
  for_each_index(r.dims, [&](int64_t, const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t a = 0; a < rank; ++a) off += idx[a] * ds[size_t(norm_axis(perm[a], rank))];
    r.v.push_back(d.v.at(size_t(off)));
  });
  return r;
}

Const unary(const std::string& op, Const r) {
  for (double& x : r.v) {
    if (op == "Neg") x = -x;
    else if (op == "Floor") x = std::floor(x);
    else if (op == "Ceil") x = std::ceil(x);
    else if (op == "Sqrt") x = std::sqrt(x);
    else if (op == "Abs") x = std::fabs(x);
    else if (op == "Relu") x = std::max(x, 0.0);
    else x = 1.0 / x;
    if (!r.is_int) x = double(float(x));
  }
  return r;
}

// Elementwise with numpy broadcasting.
Const binary(const std::string& op, const Const& a, const Const& b) {
  const size_t rank = std::max(a.dims.size(), b.dims.size());
  Dims ad(rank - a.dims.size(), 1), bd(rank - b.dims.size(), 1);
  ad.insert(ad.end(), a.dims.begin(), a.dims.end());
  bd.insert(bd.end(), b.dims.begin(), b.dims.end());
  Const r;
  r.is_int = a.is_int && b.is_int;
  r.dims.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1)
      throw Fail("cannot broadcast " + dims_str(a.dims) + " with " + dims_str(b.dims));
    r.dims[i] = ad[i] == 1 ? bd[i] : ad[i];
  }
  auto as = strides_of(ad), bs = strides_of(bd);
  for_each_index(r.dims, [&](int64_t, const std::vector<int64_t>& idx) {
    int64_t ao = 0, bo = 0;
    for (size_t i = 0; i < rank; ++i) {
      if (ad[i] != 1) ao += idx[i] * as[i];
      if (bd[i] != 1) bo += idx[i] * bs[i];
    }
    const double x = a.v.at(size_t(ao)), y = b.v.at(size_t(bo));
    double z;
    if (op == "Add") z = x + y;
    else if (op == "Sub") z = x - y;
    else if (op == "Mul") z = x * y;
    else if (op == "Div") {
      if (r.is_int && y == 0) throw Fail("integer division by zero");
      z = r.is_int ? std::trunc(x / y) : x / y;
    } else if (op == "Pow") z = std::pow(x, y);
    else if (op == "Min") z = std::min(x, y);
    else z = std::max(x, y);
    r.v.push_back(r.is_int ? z : double(float(z)));
  });
  return r;
}

}  // namespace

std::optional<Const> fold_constant(const OnnxNode& n, const ConstInput& operand, int opset) {
  const std::string& op = n.op;
  auto c = [&](int i) -> const Const& { return need(operand, i); };
  if (op == "Constant") return constant(n);
  if (op == "ConstantOfShape") return constant_of_shape(n, c(0));
  if (op == "Cast") return cast(n, c(0));
  if (is_reshape_like(op)) {
    Const r = c(0);
    r.dims = reshaped_dims(n, opset, r.dims, operand, true);
    return r;
  }
  if (op == "Concat") return concat(n, operand);
  if (op == "Gather") {
    const Const& d = c(0);
    return gather(n, d, c(1));
  }
  if (op == "Slice") return slice(n, operand, opset);
  if (op == "Transpose") return transpose(n, c(0));
  static const std::set<std::string> unary_ops = {"Neg", "Floor", "Ceil", "Sqrt", "Abs", "Relu", "Reciprocal"};
  if (unary_ops.count(op)) return unary(op, c(0));
  static const std::set<std::string> binary_ops = {"Add", "Sub", "Mul", "Div", "Pow", "Min", "Max"};
  if (binary_ops.count(op)) {
    const Const& a = c(0);
    return binary(op, a, c(1));
  }
  return std::nullopt;
}

}  // namespace ts::onnx_import
