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
import math
import os
import struct
import sys
import time
import zlib
from fractions import Fraction

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
OPS = {1: "Conv", 2: "Gemm", 3: "Add", 4: "Mul", 5: "Concat", 6: "AvgPool",
       7: "GlobalAvgPool", 8: "MaxPool", 9: "Lut", 10: "Pad", 11: "Slice", 12: "Shuffle",
       13: "ChannelLut", 14: "Resize", 15: "ConvTranspose", 16: "Transpose"}
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
    if ver != 2:
        raise RefError(f"{path}: quantised model version {ver} is not supported (need 2)")
    if zlib.crc32(body) & 0xFFFFFFFF != crc:
        raise RefError(f"{path}: checksum mismatch (file is corrupt)")
    m = {"source": r.str(), "calibration": r.str()}
    nl = r.u32()
    if nl > 100000:
        raise RefError(f"{path}: corrupt label count")
    m["labels"] = [r.str() for _ in range(nl)]
    m["mean_std"] = [(r.f32(), r.f32()) for _ in range(3)]
    m["bgr"] = r.u8() != 0
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
    a, b = xs
    sh, sw = n["sh"], n["sw"]
    if (sh, sw) != (1, 1):
        # The second operand read nearest-upsampled by whole factors: (y, x)
        # reads (y // sh, x // sw).
        if (b.shape[0], b.shape[1] * sh, b.shape[2] * sw) != a.shape:
            raise RefError(f"{what}: Add operand {b.shape} upsampled {sh}x{sw} is not {a.shape}")
        b = np.repeat(np.repeat(b, sh, axis=1), sw, axis=2)
    elif b.shape != a.shape:
        raise RefError(f"{what}: Add operand shapes {a.shape} and {b.shape}")
    parts = []
    for k, x in enumerate((a, b)):
        s = n["slots"][k]
        v = check_i32((x.astype(np.int64) - s["zp"]) * (1 << ls), what)
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


def op_slice(n, xs, what):
    # docs/int8.md: out[c, y, x] = in[pad_b + c*dh, pad_t + y*sh, pad_l + x*sw]
    x = xs[0]
    C, OH, OW = n["out_dims"]
    c0, y0, x0 = n["pad_b"], n["pad_t"], n["pad_l"]
    cs, ys, xs_ = n["dh"], n["sh"], n["sw"]
    if c0 + (C - 1) * cs >= x.shape[0] or y0 + (OH - 1) * ys >= x.shape[1] or x0 + (OW - 1) * xs_ >= x.shape[2]:
        raise RefError(f"{what}: the slice reaches past the input")
    return x[c0:c0 + (C - 1) * cs + 1:cs, y0:y0 + (OH - 1) * ys + 1:ys, x0:x0 + (OW - 1) * xs_ + 1:xs_].copy()


def op_shuffle(n, xs, what):
    # docs/int8.md: view [g, C/g, H, W], swap the two channel axes, view [C, H, W]
    x = xs[0]
    C, H, W = x.shape
    g = n["groups"]
    if g < 1 or C % g:
        raise RefError(f"{what}: {g} groups do not divide {C} channels")
    return x.reshape(g, C // g, H, W).transpose(1, 0, 2, 3).reshape(C, H, W).copy()


def op_transpose(n, xs, what):
    # docs/int8.md: output axis a (0 C, 1 H, 2 W) is input axis kh-1, kw-1, dh-1
    perm = (n["kh"] - 1, n["kw"] - 1, n["dh"] - 1)
    if sorted(perm) != [0, 1, 2]:
        raise RefError(f"{what}: kh, kw, dh = {n['kh']}, {n['kw']}, {n['dh']} is not a permutation of 1, 2, 3")
    return xs[0].transpose(perm).copy()


def op_channel_lut(n, xs, what):
    x = xs[0]
    C = x.shape[0]
    if n["lut"].size != 256 * C:
        raise RefError(f"{what}: per-channel LUT has {n['lut'].size} entries, not 256 x {C}")
    tables = n["lut"].reshape(C, 256)
    return tables[np.arange(C)[:, None, None], x.astype(np.int64) + 128]
def resize_source(coord, n, m, o):
    """docs/int8.md, Resize: the source coordinate of output index o as an exact fraction."""
    if coord == 1:                       # asymmetric
        return Fraction(o * n, m)
    if coord == 2 or (coord == 4 and m > 1):   # half_pixel, pytorch_half_pixel
        return Fraction(2 * o + 1, 2) * Fraction(n, m) - Fraction(1, 2)
    if coord == 4:
        return Fraction(0)
    if coord == 3:                       # align_corners
        return Fraction(o * (n - 1), m - 1) if m > 1 else Fraction(0)
    raise RefError(f"Resize coordinate transform {coord} unknown")


def resize_axis(interp, coord, rounding, n, m):
    """Per output index: (i0, i1, w1) with w1 the weight of i1 in 256ths."""
    out = []
    for o in range(m):
        x = resize_source(coord, n, m, o)
        if interp == 1:
            if rounding == 1:
                i = math.floor(x)
            elif rounding == 2:
                i = math.ceil(x)
            elif rounding == 3:          # round, halves down
                i = math.ceil(x - Fraction(1, 2))
            elif rounding == 4:          # round, halves up
                i = math.floor(x + Fraction(1, 2))
            else:
                raise RefError(f"Resize rounding {rounding} unknown")
            i = min(max(i, 0), n - 1)
            out.append((i, i, 0))
            continue
        x = min(max(x, Fraction(0)), Fraction(n - 1))
        i0 = math.floor(x)
        w1 = math.floor((x - i0) * 256 + Fraction(1, 2))
        out.append((i0, min(i0 + 1, n - 1), w1))
    return out


def op_resize(n, xs, what):
    x = xs[0].astype(np.int64)
    C0, H, W = x.shape
    C, OH, OW = n["out_dims"]
    interp, coord, rounding = n["kh"], n["kw"], n["dh"]
    if C != C0 or interp not in (1, 2):
        raise RefError(f"{what}: bad Resize")
    zp = n["slots"][0]["zp"]
    if n["out_zp"] != zp:
        raise RefError(f"{what}: Resize output zero point differs from the input's")
    ry = resize_axis(interp, coord, rounding, H, OH)
    rx = resize_axis(interp, coord, rounding, W, OW)
    lo, hi = clamp_bounds(n)
    y0 = np.array([r[0] for r in ry]); y1 = np.array([r[1] for r in ry]); wy = np.array([r[2] for r in ry])
    x0 = np.array([r[0] for r in rx]); x1 = np.array([r[1] for r in rx]); wx = np.array([r[2] for r in rx])
    if interp == 1:
        return np.clip(x[:, y0][:, :, x0], lo, hi).astype(np.int8)
    xc = x - zp
    a, b = xc[:, y0][:, :, x0], xc[:, y0][:, :, x1]
    c, d = xc[:, y1][:, :, x0], xc[:, y1][:, :, x1]
    wxr, wyr = wx[None, None, :], wy[None, :, None]
    acc = (256 - wyr) * ((256 - wxr) * a + wxr * b) + wyr * ((256 - wxr) * c + wxr * d)
    v = ((acc + (1 << 15)) >> 16) + zp          # nearest, halves up
    return np.clip(v, lo, hi).astype(np.int8)


def op_conv_transpose(n, xs, what):
    """Scatter form: input (ci, iy, ix) adds w[o][ci][ky][kx] * (x - zp) to output
    (iy*sh - pad_t + ky, ix*sw - pad_l + kx); the full frame is then cropped."""
    x = xs[0].astype(np.int64) - n["slots"][0]["zp"]
    C0, H, W = x.shape
    C, OH, OW = n["out_dims"]
    G, kh, kw, sh, sw = n["groups"], n["kh"], n["kw"], n["sh"], n["sw"]
    if G <= 0 or C0 % G or C % G or n["dh"] != 1 or n["dw"] != 1:
        raise RefError(f"{what}: bad ConvTranspose geometry")
    Cg, Og = C0 // G, C // G
    pt, pl = n["pad_t"], n["pad_l"]
    FH, FW = (H - 1) * sh + kh, (W - 1) * sw + kw
    if pt + OH > FH or pl + OW > FW:
        raise RefError(f"{what}: output larger than the transposed frame")
    w = n["weights"].astype(np.int64).reshape(G, Og, Cg, kh, kw)
    full = np.zeros((C, FH, FW), dtype=np.int64)
    for g in range(G):
        xg = x[g * Cg:(g + 1) * Cg].reshape(Cg, H * W)
        for ky in range(kh):
            for kx in range(kw):
                contrib = (w[g, :, :, ky, kx] @ xg).reshape(Og, H, W)
                full[g * Og:(g + 1) * Og, ky:ky + (H - 1) * sh + 1:sh, kx:kx + (W - 1) * sw + 1:sw] += contrib
    acc = full[:, pt:pt + OH, pl:pl + OW].reshape(C, OH * OW) + n["bias"][:, None]
    lo, hi = clamp_bounds(n)
    y = requant(acc, n["mult"][:, None], n["shift"][:, None], n["out_zp"], lo, hi, what)
    return y.reshape(C, OH, OW)


KERNELS = {"Conv": op_conv, "Gemm": op_gemm, "Add": op_add, "Mul": op_mul, "Concat": op_concat,
           "AvgPool": op_avgpool, "GlobalAvgPool": op_gap, "MaxPool": op_maxpool, "Lut": op_lut, "Pad": op_pad,
           "Slice": op_slice, "Shuffle": op_shuffle, "ChannelLut": op_channel_lut,
           "Resize": op_resize, "ConvTranspose": op_conv_transpose, "Transpose": op_transpose}


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


# ---------------------------------------------------------------- .tsqm writer and random models (for `fuzz`)

def save_tsqm(m, path):
    """Writes a model dict (as load_tsqm returns) in the layout of docs/int8.md section 4."""
    out = bytearray()
    u8 = lambda v: out.extend(struct.pack("<B", v))  # noqa: E731
    u32 = lambda v: out.extend(struct.pack("<I", v))  # noqa: E731
    i32 = lambda v: out.extend(struct.pack("<i", int(v)))  # noqa: E731
    f32 = lambda v: out.extend(struct.pack("<f", v))  # noqa: E731

    def text(v):
        b = v.encode("utf-8")
        u32(len(b))
        out.extend(b)

    def vec8(a):
        a = np.asarray(a, dtype=np.int8)
        u32(a.size)
        out.extend(a.tobytes())

    def vec32(a):
        a = np.asarray(a, dtype="<i4")
        u32(a.size)
        out.extend(a.tobytes())

    u32(0x4D515354)
    u32(2)
    text(m["source"])
    text(m["calibration"])
    u32(len(m["labels"]))
    for lab in m["labels"]:
        text(lab)
    for mean, std in m["mean_std"]:
        f32(mean)
        f32(std)
    u8(1 if m.get("bgr") else 0)
    i32(m["input"])
    i32(m["output"])
    u8(1 if m["softmax"] else 0)
    u32(len(m["tensors"]))
    for t in m["tensors"]:
        text(t["name"])
        for v in t["shape"]:
            i32(v)
        f32(t["scale"])
        i32(t["zp"])
    u32(len(m["nodes"]))
    codes = {v: k for k, v in OPS.items()}
    for n in m["nodes"]:
        text(n["name"])
        u8(codes[n["op"]])
        u32(len(n["inputs"]))
        for t in n["inputs"]:
            i32(t)
        i32(n["output"])
        u8(n["n_inputs"])
        u8(n["count_include_pad"])
        for sl in n["slots"]:
            for v in sl["dims"]:
                i32(v)
            i32(sl["zp"])
            i32(sl["mult"])
            i32(sl["shift"])
        for v in n["out_dims"]:
            i32(v)
        for k in SCALARS:
            i32(n[k])
        vec8(n["weights"])
        vec32(n["bias"])
        vec32(n["mult"])
        vec32(n["shift"])
        vec8(n["lut"])
        out.extend(struct.pack("<Q", n["macs"]))
    out.extend(struct.pack("<I", zlib.crc32(bytes(out)) & 0xFFFFFFFF))
    with open(path, "wb") as f:
        f.write(bytes(out))


def random_multiplier(rng):
    """A (Q31 mantissa, shift) pair as quantize_multiplier makes them, edges included."""
    u = rng.random()
    if u < 0.03:
        return 0, 0
    m = int(rng.choice([1 << 30, INT32_MAX])) if u < 0.15 else int(rng.integers(1 << 30, 1 << 31))
    v = rng.random()
    if v < 0.7:
        s = int(rng.integers(-12, 1))
    elif v < 0.85:
        s = int(rng.integers(-31, -12))
    else:
        s = int(rng.integers(1, 9)) if rng.random() < 0.5 else int(rng.integers(9, 31))  # M >= 1: a left shift, may saturate
    return m, s


def random_model(rng, n_layers, past_cip=False):
    """A random DAG of every QOp with random geometry, zero points, multipliers and clamps.

    Pool windows may take ceil mode, always with the extra bottom/right padding the importer
    adds: the .tsqm reader refuses windows that run past the padded image, which is where the
    C++ kernel used to differ from docs/int8.md (see "Disagreements found"). `past_cip` is
    kept for the command line and has no effect any more."""
    tensors, nodes = [], []

    def new_tensor(shape, zp=None):
        tensors.append({"name": f"t{len(tensors)}", "shape": tuple(int(v) for v in shape), "scale": 1.0,
                        "zp": int(rng.integers(-128, 128)) if zp is None else zp})
        return len(tensors) - 1

    def node(op, ins, out_shape, out_zp=None, **kw):
        n = {"name": f"n{len(nodes)}_{op}", "op": op, "inputs": list(ins), "n_inputs": len(ins),
             "count_include_pad": 0, "weights": np.zeros(0, np.int8), "lut": np.zeros(0, np.int8),
             "bias": np.zeros(0, np.int64), "mult": np.zeros(0, np.int64), "shift": np.zeros(0, np.int64), "macs": 0}
        for k in SCALARS:
            n[k] = 0
        n.update(kh=1, kw=1, sh=1, sw=1, dh=1, dw=1, groups=1, act_min=-128, act_max=127)
        slots = [{"dims": (0, 0, 0), "zp": 0, "mult": 0, "shift": 0} for _ in range(MAX_INPUTS)]
        for k, t in enumerate(ins):
            slots[k] = {"dims": tensors[t]["shape"], "zp": tensors[t]["zp"], "mult": 0, "shift": 0}
        n["slots"] = slots
        n.update(kw)
        out = new_tensor(out_shape, out_zp)
        n["output"] = out
        n["out_dims"] = tensors[out]["shape"]
        n["out_zp"] = tensors[out]["zp"]
        nodes.append(n)
        return n

    def clamp_pair():
        if rng.random() < 0.5:
            return -128, 127
        a, b = sorted(int(v) for v in rng.integers(-128, 128, size=2))
        return a, b

    def window(H, W, pooling):
        for _ in range(50):
            kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
            sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
            dh, dw = (1, 1) if pooling else (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
            lim = (kh, kw) if pooling else (4, 4)
            pt, pb = int(rng.integers(0, lim[0])), int(rng.integers(0, lim[0] + (1 if not pooling else 0)))
            pl, pr = int(rng.integers(0, lim[1])), int(rng.integers(0, lim[1] + (1 if not pooling else 0)))
            oh = (H + pt + pb - dh * (kh - 1) - 1) // sh + 1
            ow = (W + pl + pr - dw * (kw - 1) - 1) // sw + 1
            if H + pt + pb - dh * (kh - 1) - 1 < 0 or W + pl + pr - dw * (kw - 1) - 1 < 0:
                continue
            if pooling and ((oh - 1) * sh >= H + pt or (ow - 1) * sw >= W + pl):
                continue
            if pooling and rng.random() < 0.3:  # ceil mode: one more output whose window starts inside
                if oh * sh < H + pt:
                    # ... with the bottom padding extended to cover it: a window running past
                    # the padded image is refused by the .tsqm reader (docs/int8.md).
                    pb += max(0, oh * sh + kh - (H + pt + pb))
                    oh += 1
            past = (oh - 1) * sh + kh > H + pt + pb or (ow - 1) * sw + kw > W + pl + pr
            return dict(kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pad_t=pt, pad_l=pl, pad_b=pb, pad_r=pr), oh, ow, past
        return None

    C, H, W = int(rng.integers(1, 7)), int(rng.integers(3, 15)), int(rng.integers(3, 15))
    x = new_tensor((C, H, W))
    ops = ["Conv", "Conv", "Conv", "Gemm", "Add", "Mul", "Concat", "AvgPool", "GlobalAvgPool", "MaxPool", "Lut", "Pad",
           "Slice", "Shuffle", "ChannelLut", "Resize", "ConvTranspose", "Transpose"]
    for _ in range(n_layers):
        op = str(rng.choice(ops))
        spatial = [i for i, t in enumerate(tensors) if t["shape"][1] > 1 or t["shape"][2] > 1]
        src = int(rng.choice(spatial)) if spatial and rng.random() < 0.9 else int(rng.integers(0, len(tensors)))
        C, H, W = tensors[src]["shape"]
        if op == "Conv":
            g = window(H, W, False)
            if g is None:
                continue
            geo, oh, ow, _ = g
            divs = [d for d in range(1, C + 1) if C % d == 0]
            G = int(rng.choice(divs)) if rng.random() < 0.6 else C
            Og = int(rng.integers(1, 4)) if G == C else int(rng.integers(1, 4))
            OC = G * Og
            mults = [random_multiplier(rng) for _ in range(OC)]
            lo, hi = clamp_pair()
            node("Conv", [src], (OC, oh, ow), groups=G, act_min=lo, act_max=hi,
                 weights=rng.integers(-127, 128, size=OC * (C // G) * geo["kh"] * geo["kw"]).astype(np.int8),
                 bias=rng.integers(-(1 << 20), 1 << 20, size=OC), mult=np.array([m for m, _ in mults]),
                 shift=np.array([s for _, s in mults]), **geo)
        elif op == "Gemm":
            if C * H * W > 600:
                continue
            N = int(rng.integers(1, 17))
            mults = [random_multiplier(rng) for _ in range(N)]
            lo, hi = clamp_pair()
            node("Gemm", [src], (N, 1, 1), act_min=lo, act_max=hi,
                 weights=rng.integers(-127, 128, size=N * C * H * W).astype(np.int8),
                 bias=rng.integers(-(1 << 20), 1 << 20, size=N), mult=np.array([m for m, _ in mults]),
                 shift=np.array([s for _, s in mults]))
        elif op == "Add":
            same = [i for i, t in enumerate(tensors) if t["shape"] == (C, H, W)]
            other = int(rng.choice(same))
            n = node("Add", [src, other], (C, H, W), left_shift=20, act_min=clamp_pair()[0])
            om, _ = random_multiplier(rng)
            osh = int(rng.integers(-31, -9)) if rng.random() < 0.8 else int(rng.integers(-9, 3))
            n.update(out_mult=om, out_shift=osh)
            for k in range(2):
                m, s = random_multiplier(rng)
                n["slots"][k].update(mult=m, shift=min(s, -1))
        elif op == "Mul":
            cands = [i for i, t in enumerate(tensors) if t["shape"] in ((C, H, W), (C, 1, 1))]
            other = int(rng.choice(cands))
            m, s = random_multiplier(rng)
            lo, hi = clamp_pair()
            node("Mul", [src, other], (C, H, W), out_mult=m, out_shift=s, act_min=lo, act_max=hi)
        elif op == "Concat":
            same = [i for i, t in enumerate(tensors) if t["shape"][1:] == (H, W)]
            ins = [src] + [int(v) for v in rng.choice(same, size=int(rng.integers(0, 3)))]
            n = node("Concat", ins, (sum(tensors[i]["shape"][0] for i in ins), H, W))
            for k in range(len(ins)):
                m, s = random_multiplier(rng)
                n["slots"][k].update(mult=m, shift=s)
        elif op in ("AvgPool", "MaxPool"):
            g = window(H, W, True)
            if g is None:
                continue
            geo, oh, ow, past = g
            if op == "MaxPool":
                node("MaxPool", [src], (C, oh, ow), out_zp=tensors[src]["zp"], **geo)
            else:
                taps = geo["kh"] * geo["kw"]
                mults = [random_multiplier(rng) for _ in range(taps)]
                lo, hi = clamp_pair()
                cip = int(rng.integers(0, 2)) if past_cip or not past else 0
                node("AvgPool", [src], (C, oh, ow), count_include_pad=cip, act_min=lo, act_max=hi,
                     mult=np.array([m for m, _ in mults]), shift=np.array([s for _, s in mults]), **geo)
        elif op == "GlobalAvgPool":
            m, s = random_multiplier(rng)
            node("GlobalAvgPool", [src], (C, 1, 1), out_mult=m, out_shift=s)
        elif op == "Lut":
            node("Lut", [src], (C, H, W), lut=rng.integers(-128, 128, size=256).astype(np.int8))
        elif op == "Slice":
            step = [int(v) for v in rng.integers(1, 3, size=3)]
            start = [int(rng.integers(0, d)) for d in (C, H, W)]
            cnt = [int(rng.integers(1, (d - s0 - 1) // st + 2)) for d, s0, st in zip((C, H, W), start, step)]
            node("Slice", [src], tuple(cnt), out_zp=tensors[src]["zp"], pad_b=start[0], dh=step[0],
                 pad_t=start[1], sh=step[1], pad_l=start[2], sw=step[2])
        elif op == "Shuffle":
            g = int(rng.choice([d for d in range(1, C + 1) if C % d == 0]))
            node("Shuffle", [src], (C, H, W), out_zp=tensors[src]["zp"], groups=g)
        elif op == "Transpose":
            perm = [int(v) for v in rng.permutation(3)]
            dims = (C, H, W)
            node("Transpose", [src], tuple(dims[p] for p in perm), out_zp=tensors[src]["zp"],
                 kh=perm[0] + 1, kw=perm[1] + 1, dh=perm[2] + 1)
        elif op == "ChannelLut":
            node("ChannelLut", [src], (C, H, W), lut=rng.integers(-128, 128, size=256 * C).astype(np.int8))
        elif op == "Resize":
            if H * W > 400:
                continue
            interp = int(rng.integers(1, 3))
            oh, ow = int(rng.integers(1, 3 * H + 1)), int(rng.integers(1, 3 * W + 1))
            lo, hi = clamp_pair()
            node("Resize", [src], (C, oh, ow), out_zp=tensors[src]["zp"], kh=interp, kw=int(rng.integers(1, 5)),
                 dh=int(rng.integers(1, 5)) if interp == 1 else 1, act_min=lo, act_max=hi)
        elif op == "ConvTranspose":
            if H * W > 400:
                continue
            kh, kw, sh, sw = (int(v) for v in rng.integers(1, 5, size=4))
            pt, pb = int(rng.integers(0, kh)), int(rng.integers(0, kh))
            pl, pr = int(rng.integers(0, kw)), int(rng.integers(0, kw))
            oh, ow = (H - 1) * sh + kh - pt - pb, (W - 1) * sw + kw - pl - pr
            if oh < 1 or ow < 1:
                continue
            divs = [d for d in range(1, C + 1) if C % d == 0]
            G = int(rng.choice(divs))
            OC = G * int(rng.integers(1, 4))
            mults = [random_multiplier(rng) for _ in range(OC)]
            lo, hi = clamp_pair()
            node("ConvTranspose", [src], (OC, oh, ow), groups=G, act_min=lo, act_max=hi, kh=kh, kw=kw, sh=sh, sw=sw,
                 pad_t=pt, pad_l=pl, pad_b=pb, pad_r=pr,
                 weights=rng.integers(-127, 128, size=OC * (C // G) * kh * kw).astype(np.int8),
                 bias=rng.integers(-(1 << 20), 1 << 20, size=OC), mult=np.array([m for m, _ in mults]),
                 shift=np.array([s for _, s in mults]))
        elif op == "Pad":
            p = [int(v) for v in rng.integers(0, 4, size=4)]
            node("Pad", [src], (C, H + p[0] + p[2], W + p[1] + p[3]), out_zp=tensors[src]["zp"],
                 pad_t=p[0], pad_l=p[1], pad_b=p[2], pad_r=p[3])
    return {"source": "fuzz", "calibration": "random", "labels": [], "mean_std": [(0.0, 1.0)] * 3,
            "input": x, "output": len(tensors) - 1, "softmax": False, "tensors": tensors, "nodes": nodes}


def cmd_fuzz(a):
    import subprocess
    import tempfile
    rng = np.random.default_rng(a.seed)
    total_layers, differ_models, ops = 0, [], {}
    with tempfile.TemporaryDirectory(prefix="int8_fuzz.") as tmp:
        for i in range(a.models):
            m = random_model(rng, int(rng.integers(3, a.layers + 1)), a.past_padding)
            if not m["nodes"]:
                continue
            model = os.path.join(tmp, f"m{i}.tsqm")
            save_tsqm(m, model)
            x = rng.integers(-128, 128, size=m["tensors"][m["input"]]["shape"]).astype(np.int8)
            np.save(os.path.join(tmp, "x.npy"), x)
            dump = os.path.join(tmp, f"d{i}")
            p = subprocess.run([a.bin, "dump", "-m", model, "-s", "0", "--input", os.path.join(tmp, "x.npy"), "-o", dump],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise RefError(f"random model {i} (seed {a.seed}): tinysplit dump failed: {p.stderr.strip()}")
            with open(os.path.join(dump, "index.json")) as fh:
                idx = json.load(fh)
            outs = run_model(m, x)
            for e, n, y in zip(idx["layers"], m["nodes"], outs):
                ops[n["op"]] = ops.get(n["op"], 0) + 1
                c = np.load(os.path.join(dump, e["file"]))
                if c.shape != y.shape or not np.array_equal(c, y):
                    bad = np.flatnonzero(c.reshape(-1) != y.reshape(-1)) if c.shape == y.shape else [0]
                    pos = [int(v) for v in np.unravel_index(bad[0], y.shape)]
                    print(f"random model {i}: layer {e['index']} '{n['name']}' differs first at [c,y,x]={pos}: "
                          f"C++ {int(c.reshape(-1)[bad[0]])} vs Python {int(y.reshape(-1)[bad[0]])}")
                    if a.keep:
                        save_tsqm(m, os.path.join(a.keep, f"fuzz_seed{a.seed}_m{i}.tsqm"))
                        np.save(os.path.join(a.keep, f"fuzz_seed{a.seed}_m{i}_input.npy"), x)
                    differ_models.append(i)
                    break
            total_layers += len(m["nodes"])
            shutil_rmtree(dump)
    print(json.dumps({"models": a.models, "layers": total_layers, "ops": dict(sorted(ops.items())),
                      "differ": len(differ_models), "seed": a.seed}))
    return 1 if differ_models else 0


def shutil_rmtree(path):
    import shutil
    shutil.rmtree(path, ignore_errors=True)


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
    f = sub.add_parser("fuzz", help="random models of every op through `tinysplit dump --input`, compared")
    f.add_argument("--bin", required=True, help="the tinysplit binary")
    f.add_argument("--seed", type=int, default=1)
    f.add_argument("--models", type=int, default=50)
    f.add_argument("--layers", type=int, default=8, help="at most this many layers per model")
    f.add_argument("--keep", help="folder to keep a differing model and its input in")
    f.add_argument("--past-padding", action="store_true",
                   help="also AvgPool windows with count_include_pad past the padded image (known C++ difference)")
    a = p.parse_args(argv)
    try:
        return {"run": cmd_run, "compare": cmd_compare, "fuzz": cmd_fuzz}[a.cmd](a)
    except RefError as e:
        print(f"int8_reference: error: {e}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"int8_reference: error: index.json lacks field {e}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, OSError) as e:  # e.g. a malformed index.json entry
        print(f"int8_reference: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
