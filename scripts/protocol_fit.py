#!/usr/bin/python3
"""Fits a board kind's protocol prices (core/layer_work.h) to its firmware's
per-layer log lines (scripts/board_costs.sh runs the plans and calls this).

    protocol_fit.py TMP KIND RUN...        (RUN = STRATEGY:BOARDS, its logs in TMP/fit-RUN)

Every board logs, per layer it computes, `other=` (its busy instructions
since the previous layer's line outside the kernels) and `nic=` (the part of
them in the network controller's programmed I/O, which a Teensy's DMA does
not spend), and once per fragment each layer's pieces (`pieces N
local_runs= recv_runs= sends= net= local= out=`: core::layer_work of its
fragment entry). A frame is handled when it
arrives, whichever layer the board is at, so the lines do not split a
board's work by layer; their sum over one inference does. The fit is on
those sums, one per board and run: least squares with every price >= 0 (a
price fitted below 0 is dropped and the rest fitted again). Only the last
inference is counted (the first carries the deploy). Prints the JSON object
board_costs.sh stores as "protocol_instructions".
"""
import glob
import json
import sys

import numpy as np

FEATURES = ("per_layer", "per_local_run", "per_recv_run", "per_send", "per_net_byte", "per_local_byte", "per_out_byte")
COUNTS = (None, "local_runs", "recv_runs", "sends", "net", "local", "out")


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def board_total(path):
    """(features summed over the last inference's layers, instructions outside kernels and NIC)."""
    text = open(path).read().splitlines()
    lines = [(int(l.split()[1]), fields(l)) for l in text if l.startswith("layer ")]
    pieces = {int(l.split()[1]): fields(l) for l in text if l.startswith("pieces ")}
    if not lines:
        sys.exit(f"protocol_fit: no per-layer lines in {path}")
    if not pieces:
        sys.exit(f"protocol_fit: {path} has no pieces lines (a firmware image from before core/layer_work.h)")
    start = 0
    for i in range(1, len(lines)):
        if lines[i][0] <= lines[i - 1][0]:
            start = i  # a new inference
    if start == 0:
        sys.exit(f"protocol_fit: {path} has one inference (the runs need --repeat 2)")
    x, y = np.zeros(len(FEATURES)), 0.0
    for n, f in lines[start:]:
        if n not in pieces:
            sys.exit(f"protocol_fit: {path}: layer {n} computed but not among the fragment's pieces lines")
        x += [1.0] + [float(pieces[n][k]) for k in COUNTS[1:]]
        y += float(int(f["other"]) - int(f["nic"]))
    return x, y


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
    tmp, kind, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
    labels, xs, ys = [], [], []
    for run in runs:
        paths = sorted(glob.glob(f"{tmp}/fit-{run}/board-*/qemu.log"))
        if not paths:
            sys.exit(f"protocol_fit: no board logs for {run}")
        for path in paths:
            x, y = board_total(path)
            labels.append(f"{run}/{path.split('/')[-2]}")
            xs.append(x)
            ys.append(y)
    X, y = np.array(xs), np.array(ys)
    # Each board's total weighs alike (relative error): rows scaled by 1/y.
    c = nonneg_lstsq(X / y[:, None], np.ones(len(y)))
    err = X @ c / y - 1
    out = {k: round(float(v), 3) for k, v in zip(FEATURES, c)}
    out["fit"] = {
        "command": f"bash scripts/board_costs.sh --kind {kind} (run --strategy S --workers {kind}:N --code off "
                   f"--repeat 2 for S:N in {' '.join(runs)}; scripts/protocol_fit.py)",
        "boards_fitted": len(y),
        "max_board_error_pct": round(100 * float(np.abs(err).max()), 1),
        "rms_board_error_pct": round(100 * float(np.sqrt(np.mean(err ** 2))), 1),
        "per_board": {l: {"instructions": int(v), "error_pct": round(100 * float(e), 1)}
                      for l, v, e in zip(labels, y, err)},
        "note": "a board's instructions outside the kernels over one inference (NIC programmed I/O excluded), "
                "fitted to its pieces summed over its layers; one instruction per cycle",
    }
    json.dump(out, sys.stdout, indent=2)


main()
