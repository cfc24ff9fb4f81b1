#!/usr/bin/python3
"""Independent int8 reference for tinysplit quantised models (.tsqm).

Written from docs/int8.md (the specification of the int8 semantics and of the
.tsqm byte layout), not from the C++ kernels, so that it can check them.

    int8_reference.py run MODEL.tsqm INPUT.npy -o DIR   every layer's int8 output as .npy
    int8_reference.py compare DUMP                      compare with `tinysplit dump -o DUMP`

`compare` reads DUMP/index.json, DUMP/model.tsqm and DUMP/input.npy, runs the
whole model here (each layer from this program's own previous outputs), and
compares every layer with the C++ tensor DUMP/<file>. It prints one line per
differing layer and, last, one JSON line; exit 0 = identical, 1 = a layer
differs, 2 = bad input (one line on stderr).

Needs only /usr/bin/python3 and numpy (Debian: python3-numpy).
"""
import argparse
import json
import os
import struct
import sys
import time
import zlib

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
OPS = {1: "Conv", 2: "Gemm", 3: "Add", 4: "Mul", 5: "Concat", 6: "AvgPool",
       7: "GlobalAvgPool", 8: "MaxPool", 9: "Lut", 10: "Pad"}
MAX_INPUTS = 8
SCALARS = ("out_zp", "act_min", "act_max", "kh", "kw", "sh", "sw", "dh", "dw",
           "pad_t", "pad_l", "pad_b", "pad_r", "groups", "left_shift", "out_mult", "out_shift")


class RefError(Exception):
    """A defect in the input files or the model; reported as one line."""


# ---------------------------------------------------------------- .tsqm reader (docs/int8.md section 4)

class Reader:
    def __init__(self, data, what):
        self.b = data
        self.off = 0
        self.what = what

    def take(self, n):
        if n > len(self.b) - self.off:
            raise RefError(f"{self.what}: truncated or corrupt (field past the end at byte {self.off})")
        v = self.b[self.off:self.off + n]
        self.off += n
        return v

    def u8(self):
        return self.take(1)[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def i32(self):
        return struct.unpack("<i", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def f32(self):
        return struct.unpack("<f", self.take(4))[0]

    def str(self):
        return self.take(self.u32()).decode("utf-8", errors="replace")

    def vec_i8(self):
        n = self.u32()
        return np.frombuffer(self.take(n), dtype=np.int8).copy()

    def vec_i32(self):
        n = self.u32()
        return np.frombuffer(self.take(4 * n), dtype="<i4").astype(np.int64)


def load_tsqm(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise RefError(f"cannot read quantised model '{path}': {e.strerror}")
    if len(data) < 12:
        raise RefError(f"{path}: not a tinysplit quantised model (too short)")
    body, (crc,) = data[:-4], struct.unpack("<I", data[-4:])
    r = Reader(body, path)
    if r.u32() != 0x4D515354:
        raise RefError(f"{path}: not a tinysplit quantised model (bad magic)")
    ver = r.u32()
    if ver != 1:
        raise RefError(f"{path}: quantised model version {ver} is not supported (need 1)")
    if zlib.crc32(body) & 0xFFFFFFFF != crc:
        raise RefError(f"{path}: checksum mismatch (file is corrupt)")
    m = {"source": r.str(), "calibration": r.str()}
    nl = r.u32()
    if nl > 100000:
        raise RefError(f"{path}: corrupt label count")
    m["labels"] = [r.str() for _ in range(nl)]
    m["mean_std"] = [(r.f32(), r.f32()) for _ in range(3)]
    m["input"] = r.i32()
    m["output"] = r.i32()
    m["softmax"] = r.u8() != 0
    nt = r.u32()
    if nt > 1000000:
        raise RefError(f"{path}: corrupt tensor count")
    tensors = []
    for _ in range(nt):
        name = r.str()
        c, h, w = r.i32(), r.i32(), r.i32()
        if c <= 0 or h <= 0 or w <= 0:
            raise RefError(f"{path}: corrupt tensor shape")
        tensors.append({"name": name, "shape": (c, h, w), "scale": r.f32(), "zp": r.i32()})
    m["tensors"] = tensors
    nn = r.u32()
    if nn > 1000000:
        raise RefError(f"{path}: corrupt node count")
    nodes = []
    for _ in range(nn):
        n = {"name": r.str()}
        code = r.u8()
        if code not in OPS:
            raise RefError(f"{path}: unknown op code {code} in node '{n['name']}'")
        n["op"] = OPS[code]
        ni = r.u32()
        if ni > MAX_INPUTS:
            raise RefError(f"{path}: corrupt input count in node '{n['name']}'")
        n["inputs"] = [r.i32() for _ in range(ni)]
        n["output"] = r.i32()
        n["n_inputs"] = r.u8()
        n["count_include_pad"] = r.u8()
        slots = []
        for _ in range(MAX_INPUTS):
            slots.append({"dims": (r.i32(), r.i32(), r.i32()), "zp": r.i32(), "mult": r.i32(), "shift": r.i32()})
        n["slots"] = slots
        n["out_dims"] = (r.i32(), r.i32(), r.i32())
        for k in SCALARS:
            n[k] = r.i32()
        n["weights"] = r.vec_i8()
        n["bias"] = r.vec_i32()
        n["mult"] = r.vec_i32()
        n["shift"] = r.vec_i32()
        n["lut"] = r.vec_i8()
        n["macs"] = r.u64()
        nodes.append(n)
    if r.off != len(body):
        raise RefError(f"{path}: trailing bytes after the model")
    m["nodes"] = nodes
    check_model(m, path)
    return m


def check_model(m, path):
    """Structural checks: every node reads computed tensors, dims agree."""
    nt = len(m["tensors"])
    if not (0 <= m["input"] < nt and 0 <= m["output"] < nt):
        raise RefError(f"{path}: bad input/output tensor index")
    ready = {m["input"]}
    for n in m["nodes"]:
        bad = lambda why: RefError(f"{path}: node '{n['name']}' {why}")  # noqa: E731
        if not n["inputs"] or len(n["inputs"]) != n["n_inputs"]:
            raise bad("has a bad input count")
        for k, t in enumerate(n["inputs"]):
            if t not in ready:
                raise bad("reads a tensor not yet computed")
            if tuple(m["tensors"][t]["shape"]) != n["slots"][k]["dims"]:
                raise bad("input dims disagree with its tensor")
        if not (0 <= n["output"] < nt) or n["output"] in ready:
            raise bad("has a bad output")
        if tuple(m["tensors"][n["output"]]["shape"]) != n["out_dims"]:
            raise bad("output dims disagree with its tensor")
        ready.add(n["output"])


# ---------------------------------------------------------------- fixed point (docs/int8.md section 2)

def _as_i64(x):
    return np.asarray(x, dtype=np.int64)


def check_i32(x, what):
    x = _as_i64(x)
    if x.size and (x.min() < INT32_MIN or x.max() > INT32_MAX):
        raise RefError(f"{what}: accumulator outside int32 (min {x.min()}, max {x.max()})")
    return x


def srdhm(a, b):
    """floor((a*b + 2^30) / 2^31): nearest, ties toward +inf; saturates MIN*MIN."""
    a, b = _as_i64(a), _as_i64(b)
    p = a * b  # |p| <= 2^62: fits int64
    r = (p + (1 << 30)) >> 31  # arithmetic shift = floor
    return np.minimum(r, INT32_MAX)  # only MIN*MIN exceeds, giving 2^31


def rdivpot(x, e):
    """x / 2^e rounded to nearest, ties away from zero; 0 <= e <= 31."""
    x, e = _as_i64(x), _as_i64(e)
    if e.size and (e.min() < 0 or e.max() > 31):
        raise RefError(f"rounding shift {e.min()}..{e.max()} outside 0..31")
    half = (np.int64(1) << e) >> 1
    mag = (np.abs(x) + half) >> e
    return np.where(x < 0, -mag, mag)


def mbqm(x, m, s):
    """rdivpot(srdhm(sat32(x * 2^max(s,0)), m), max(-s,0))."""
    x, m, s = _as_i64(x), _as_i64(m), _as_i64(s)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    # x is int32 and left <= 30: the product is below 2^61, so int64 is exact before saturating.
    v = np.clip(x * (np.int64(1) << left), INT32_MIN, INT32_MAX)
    return rdivpot(srdhm(v, m), right)


def requant(acc, m, s, zp, lo, hi, what):
    acc = check_i32(acc, what)
    return np.clip(mbqm(acc, m, s) + zp, lo, hi).astype(np.int8)


# ---------------------------------------------------------------- layers (docs/int8.md section 3)

def window_taps(x, fill, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow):
    """x (C,H,W) -> (C, kh*kw, oh, ow): tap (ky,kx) of output (y,x) reads
    x[:, y*sh - pt + ky*dh, x*sw - pl + kx*dw], or `fill` outside the input."""
    C, H, W = x.shape
    if pt < 0 or pl < 0:
        raise RefError("negative padding")
    need_h = (oh - 1) * sh + (kh - 1) * dh + 1  # rows of the padded frame the taps span
    need_w = (ow - 1) * sw + (kw - 1) * dw + 1
    ph, pw = max(need_h, pt + H), max(need_w, pl + W)
    p = np.full((C, ph, pw), fill, dtype=x.dtype)
    p[:, pt:pt + H, pl:pl + W] = x
    taps = np.empty((C, kh * kw, oh, ow), dtype=x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dh, kx * dw
            taps[:, ky * kw + kx] = p[:, y0:y0 + (oh - 1) * sh + 1:sh, x0:x0 + (ow - 1) * sw + 1:sw]
    return taps


def clamp_bounds(n):
    return max(n["act_min"], -128), min(n["act_max"], 127)


def op_conv(n, xs, what):
    x = xs[0]
    C0, H, W = x.shape
    C, OH, OW = n["out_dims"]
    G = n["groups"]
    if G <= 0 or C0 % G or C % G:
        raise RefError(f"{what}: groups {G} do not divide channels {C0} -> {C}")
    Cg, Og = C0 // G, C // G
    kh, kw = n["kh"], n["kw"]
    zi = n["slots"][0]["zp"]
    xc = x.astype(np.int64) - zi
    if kh == kw == 1 and n["sh"] == n["sw"] == 1 and n["pad_t"] == n["pad_l"] == 0 and (OH, OW) == (H, W):
        cols = xc.reshape(G, Cg, OH * OW)
    else:
        taps = window_taps(xc, 0, kh, kw, n["sh"], n["sw"], n["dh"], n["dw"], n["pad_t"], n["pad_l"], OH, OW)
        cols = taps.reshape(G, Cg * kh * kw, OH * OW)  # row order (ci, ky, kx) = weight order
    w = n["weights"].astype(np.int64).reshape(G, Og, Cg * kh * kw)
    acc = np.matmul(w, cols).reshape(C, OH * OW) + n["bias"][:, None]
    lo, hi = clamp_bounds(n)
    y = requant(acc, n["mult"][:, None], n["shift"][:, None], n["out_zp"], lo, hi, what)
    return y.reshape(C, OH, OW)


def op_gemm(n, xs, what):
    x = xs[0].reshape(-1).astype(np.int64) - n["slots"][0]["zp"]
    C, OH, OW = n["out_dims"]
    if OH != 1 or OW != 1:
        raise RefError(f"{what}: Gemm output must be (N,1,1), got {n['out_dims']}")
    w = n["weights"].astype(np.int64).reshape(C, x.size)
    acc = w @ x + n["bias"]
    lo, hi = clamp_bounds(n)
    return requant(acc, n["mult"], n["shift"], n["out_zp"], lo, hi, what).reshape(C, 1, 1)


def op_add(n, xs, what):
    ls = n["left_shift"]
    if not 0 <= ls <= 30:
        raise RefError(f"{what}: left shift {ls} outside 0..30")
    parts = []
    for k in range(2):
        s = n["slots"][k]
        v = check_i32((xs[k].astype(np.int64) - s["zp"]) * (1 << ls), what)
        parts.append(mbqm(v, s["mult"], s["shift"]))
    lo, hi = clamp_bounds(n)
    return requant(parts[0] + parts[1], n["out_mult"], n["out_shift"], n["out_zp"], lo, hi, what)


def op_mul(n, xs, what):
    a = xs[0].astype(np.int64) - n["slots"][0]["zp"]
    b = xs[1].astype(np.int64) - n["slots"][1]["zp"]
    if b.shape != a.shape:
        if b.shape != (a.shape[0], 1, 1):
            raise RefError(f"{what}: Mul operand shapes {a.shape} and {b.shape}")
        # per-channel operand: broadcasts over (y, x)
    lo, hi = clamp_bounds(n)
    return requant(a * b, n["out_mult"], n["out_shift"], n["out_zp"], lo, hi, what)


def op_concat(n, xs, what):
    lo, hi = clamp_bounds(n)
    outs = []
    for k, x in enumerate(xs):
        s = n["slots"][k]
        outs.append(requant(x.astype(np.int64) - s["zp"], s["mult"], s["shift"], n["out_zp"], lo, hi, what))
    y = np.concatenate(outs, axis=0)
    if y.shape != tuple(n["out_dims"]):
        raise RefError(f"{what}: Concat of {[x.shape for x in xs]} is not {n['out_dims']}")
    return y


def pool_counts(n, H, W, OH, OW):
    """Per output row and column: (taps inside the input, taps in the window
    clipped to the padded image)."""
    def axis(size, out, k, s, p0, p1):
        o = np.arange(out)
        a = o * s - p0
        b = np.minimum(a + k, size + p1)
        inside = np.minimum(b, size) - np.maximum(a, 0)
        return np.maximum(inside, 0), np.maximum(b - a, 0)
    iy, py = axis(H, OH, n["kh"], n["sh"], n["pad_t"], n["pad_b"])
    ix, px = axis(W, OW, n["kw"], n["sw"], n["pad_l"], n["pad_r"])
    return np.outer(iy, ix), np.outer(py, px)


def pool_window_taps(n, x, fill, OH, OW):
    # AvgPool/MaxPool: window [y0, min(y0+kh, H+pad_b)); taps beyond H are outside the input anyway.
    return window_taps(x, fill, n["kh"], n["kw"], n["sh"], n["sw"], 1, 1, n["pad_t"], n["pad_l"], OH, OW)


def op_avgpool(n, xs, what):
    x = xs[0]
    C0, H, W = x.shape
    C, OH, OW = n["out_dims"]
    xc = x.astype(np.int64) - n["slots"][0]["zp"]
    s = pool_window_taps(n, xc, 0, OH, OW).sum(axis=1)  # (C, OH, OW)
    inside, padded = pool_counts(n, H, W, OH, OW)
    cnt = padded if n["count_include_pad"] else inside
    taps = n["kh"] * n["kw"]
    if cnt.max() > taps:
        raise RefError(f"{what}: window count {cnt.max()} beyond its {taps}-entry table")
    idx = np.maximum(cnt - 1, 0)
    lo, hi = clamp_bounds(n)
    y = requant(s, n["mult"][idx][None], n["shift"][idx][None], n["out_zp"], lo, hi, what)
    empty = np.broadcast_to(cnt == 0, y.shape)
    y[empty] = np.int8(min(max(n["out_zp"], lo), hi))
    return y


def op_gap(n, xs, what):
    x = xs[0]
    s = (x.astype(np.int64) - n["slots"][0]["zp"]).reshape(x.shape[0], -1).sum(axis=1)
    lo, hi = clamp_bounds(n)
    return requant(s, n["out_mult"], n["out_shift"], n["out_zp"], lo, hi, what).reshape(-1, 1, 1)


def op_maxpool(n, xs, what):
    x = xs[0]
    C, OH, OW = n["out_dims"]
    taps = pool_window_taps(n, x.astype(np.int16), -129, OH, OW)
    y = taps.max(axis=1)
    if (y == -129).any():
        raise RefError(f"{what}: a MaxPool window has no tap inside the input")
    return y.astype(np.int8)


def op_lut(n, xs, what):
    if n["lut"].size != 256:
        raise RefError(f"{what}: LUT has {n['lut'].size} entries, not 256")
    return n["lut"][xs[0].astype(np.int64) + 128]


def op_pad(n, xs, what):
    x = xs[0]
    C0, H, W = x.shape
    C, OH, OW = n["out_dims"]
    y = np.full((C, OH, OW), n["out_zp"], dtype=np.int8)
    pt, pl = n["pad_t"], n["pad_l"]
    # destination rows/cols that have a source inside the input
    ys, ye = max(pt, 0), min(OH, pt + H)
    xs_, xe = max(pl, 0), min(OW, pl + W)
    if ys < ye and xs_ < xe:
        y[:, ys:ye, xs_:xe] = x[:, ys - pt:ye - pt, xs_ - pl:xe - pl]
    return y


KERNELS = {"Conv": op_conv, "Gemm": op_gemm, "Add": op_add, "Mul": op_mul, "Concat": op_concat,
           "AvgPool": op_avgpool, "GlobalAvgPool": op_gap, "MaxPool": op_maxpool, "Lut": op_lut, "Pad": op_pad}


def run_model(m, x):
    """Every node's int8 output, in node order (from this program's own tensors only)."""
    t = {m["input"]: x}
    outs = []
    for i, n in enumerate(m["nodes"]):
        what = f"layer {i} '{n['name']}' ({n['op']})"
        y = KERNELS[n["op"]](n, [t[k] for k in n["inputs"]], what)
        if y.shape != tuple(n["out_dims"]) or y.dtype != np.int8:
            raise RefError(f"{what}: produced {y.shape} {y.dtype}, expected {n['out_dims']} int8")
        t[n["output"]] = y
        outs.append(y)
    return outs


# ---------------------------------------------------------------- command line

def load_input(m, path):
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise RefError(f"cannot read input '{path}': {e}")
    shape = tuple(m["tensors"][m["input"]]["shape"])
    if x.dtype != np.int8 or x.shape != shape:
        raise RefError(f"input '{path}' is {x.dtype} {x.shape}, the model needs int8 {shape}")
    return x


def cmd_run(a):
    m = load_tsqm(a.model)
    x = load_input(m, a.input)
    outs = run_model(m, x)
    os.makedirs(a.out, exist_ok=True)
    layers = []
    for i, (n, y) in enumerate(zip(m["nodes"], outs)):
        f = f"layer_{i:03d}.npy"
        np.save(os.path.join(a.out, f), y)
        layers.append({"index": i, "name": n["name"], "op": n["op"], "shape": list(y.shape), "file": f})
    with open(os.path.join(a.out, "index.json"), "w") as fh:
        json.dump({"model": a.model, "layers": layers}, fh, indent=1)
    print(json.dumps({"layers": len(layers), "out": a.out}))
    return 0


def cmd_compare(a):
    d = a.dump
    try:
        with open(os.path.join(d, "index.json")) as fh:
            idx = json.load(fh)
    except (OSError, ValueError) as e:
        raise RefError(f"cannot read '{os.path.join(d, 'index.json')}': {e}")
    m = load_tsqm(os.path.join(d, idx.get("model_file", "model.tsqm")))
    x = load_input(m, os.path.join(d, idx["input"]["file"]))
    if len(idx["layers"]) != len(m["nodes"]):
        raise RefError(f"{d}: the dump has {len(idx['layers'])} layers, the model {len(m['nodes'])}")
    t0 = time.process_time()
    outs = run_model(m, x)
    secs = time.process_time() - t0
    differ, first, elems = 0, None, 0
    for i, (e, n, y) in enumerate(zip(idx["layers"], m["nodes"], outs)):
        if e["index"] != i or e["name"] != n["name"] or e["op"] != n["op"]:
            raise RefError(f"{d}: index entry {i} ({e['name']}, {e['op']}) does not match the model's node {i} ({n['name']}, {n['op']})")
        try:
            c = np.load(os.path.join(d, e["file"]), allow_pickle=False)
        except (OSError, ValueError) as err:
            raise RefError(f"cannot read '{os.path.join(d, e['file'])}': {err}")
        if c.dtype != np.int8 or c.shape != y.shape:
            raise RefError(f"{e['file']}: C++ layer {i} is {c.dtype} {c.shape}, expected int8 {y.shape}")
        elems += y.size
        bad = np.flatnonzero(c.reshape(-1) != y.reshape(-1))
        if bad.size:
            differ += 1
            pos = [int(v) for v in np.unravel_index(bad[0], y.shape)]
            info = {"layer": i, "name": n["name"], "op": n["op"], "element": pos,
                    "cpp": int(c.reshape(-1)[bad[0]]), "python": int(y.reshape(-1)[bad[0]]),
                    "elements_differ": int(bad.size), "max_abs_diff": int(np.abs(c.astype(np.int16) - y.astype(np.int16)).max())}
            if first is None:
                first = info
            print(f"layer {i} '{n['name']}' ({n['op']}): {bad.size} of {y.size} elements differ; first at "
                  f"[c,y,x]={pos}: C++ {info['cpp']} vs Python {info['python']}, max |diff| {info['max_abs_diff']}")
    summary = {"layers": len(outs), "differ": differ, "elements": elems, "python_cpu_s": round(secs, 2),
               "model": idx.get("source", ""), "input_shape": list(x.shape)}
    if first is not None:
        summary["first"] = first
    print(json.dumps(summary))
    return 1 if differ else 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a .tsqm model on an int8 .npy input, write every layer")
    r.add_argument("model")
    r.add_argument("input")
    r.add_argument("-o", "--out", required=True)
    c = sub.add_parser("compare", help="compare with a `tinysplit dump` folder")
    c.add_argument("dump")
    a = p.parse_args(argv)
    try:
        return cmd_run(a) if a.cmd == "run" else cmd_compare(a)
    except RefError as e:
        print(f"int8_reference: error: {e}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"int8_reference: error: index.json lacks field {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
