#!/usr/bin/python3
"""Fits a board kind's protocol prices (core/layer_work.h) to its firmware's
per-layer log lines (scripts/board_costs.sh runs the plans and calls this).

    protocol_fit.py TMP KIND BOARDS STRATEGY...

Reads TMP/fit-STRATEGY/board-*/qemu.log: every board logs, per layer it
computes, `other=` (its busy instructions since the previous layer's line
outside the kernels), `nic=` (the part of them in the network controller's
programmed I/O, which a Teensy's DMA does not spend) and the layer's pieces
(local_runs, recv_runs, sends, net, local, out: core::layer_work of its fragment
entry). A layer's sends leave after its compute, so they are paid in the
next line's other=: the fit counts them there. Only the last inference's
lines are fitted (the first carries the deploy). Least squares with every
price >= 0 (a price fitted below 0 is dropped and the rest fitted again).
Prints the JSON object board_costs.sh stores as "protocol_instructions".
"""
import glob
import json
import sys

import numpy as np

FEATURES = ("per_layer", "per_local_run", "per_recv_run", "per_send", "per_net_byte", "per_local_byte", "per_out_byte")


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def board_rows(path):
    lines = [(int(l.split()[1]), fields(l)) for l in open(path) if l.startswith("layer ")]
    if not lines:
        sys.exit(f"protocol_fit: no per-layer lines in {path}")
    rows, prev_sends, start = [], 0, 0
    for i in range(1, len(lines)):
        if lines[i][0] <= lines[i - 1][0]:
            start = i  # a new inference
    for i, (_, f) in enumerate(lines):
        if "local" not in f:
            sys.exit(f"protocol_fit: {path} has no piece counts (a firmware image from before layer_work)")
        g = lambda k: int(f[k])
        if i >= start:
            rows.append(([1, g("local_runs"), g("recv_runs"), prev_sends, g("net"), g("local"), g("out")],
                         g("other") - g("nic")))
        prev_sends = g("sends")
    return rows


def nonneg_lstsq(X, y):
    active = list(range(X.shape[1]))
    while True:
        c, *_ = np.linalg.lstsq(X[:, active], y, rcond=None)
        if (c >= 0).all():
            out = np.zeros(X.shape[1])
            out[active] = c
            return out
        del active[int(np.argmin(c))]


def main():
    tmp, kind, boards, strategies = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    groups = []  # (label, rows)
    for s in strategies:
        for path in sorted(glob.glob(f"{tmp}/fit-{s}/board-*/qemu.log")):
            groups.append((f"{s}/{path.split('/')[-2]}", board_rows(path)))
    X = np.array([r[0] for _, rows in groups for r in rows], float)
    y = np.array([r[1] for _, rows in groups for r in rows], float)
    c = nonneg_lstsq(X, y)
    worst, at = 0.0, 0
    for label, rows in groups:
        meas = sum(r[1] for r in rows)
        pred = float((np.array([r[0] for r in rows], float) @ c).sum())
        if meas > 0 and abs(pred / meas - 1) > abs(worst):
            worst = pred / meas - 1
        at += len(rows)
    pred = X @ c
    out = {k: round(float(v), 3) for k, v in zip(FEATURES, c)}
    out["fit"] = {
        "command": f"bash scripts/board_costs.sh --kind {kind} (runs --strategy {','.join(strategies)} "
                   f"--code off --repeat 2 on {boards} boards; scripts/protocol_fit.py)",
        "board_layers": int(len(y)),
        "instructions_per_inference": round(float(y.sum()) / len(strategies)),
        "max_board_error_pct": round(100 * worst, 1),
        "rms_layer_error_pct": round(100 * float(np.sqrt(np.mean((pred - y) ** 2)) / np.mean(y)), 1),
        "note": "instructions outside the kernels per layer a board computes, NIC programmed I/O excluded; "
                "a layer's sends counted in the next layer's line (they leave after its compute)",
    }
    json.dump(out, sys.stdout, indent=2)


main()
