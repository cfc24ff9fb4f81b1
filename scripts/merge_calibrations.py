#!/usr/bin/env python3
"""Merges host calibrations (scripts/calibrate_host.sh) taken at several moments into one:
wake_us = per quantile, the median over every round of every file; the other figures from
the first file; the load averages of all of them. scripts/validate_sim.sh uses it to calibrate
between the runs it predicts (before each run and after the last), so that the wake-up
figures describe the machine while the runs took place.

Usage: scripts/merge_calibrations.py A.json B.json ... > merged.json
"""
import json
import statistics
import sys


def main(paths):
    if not paths:
        sys.exit("merge_calibrations: give at least one calibration file")
    docs = []
    for p in paths:
        try:
            d = json.load(open(p))
            rounds = d["wake_us_rounds"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"merge_calibrations: {p}: not a calibration with per-round figures ({e})")
        docs.append((p, d, rounds))
    tables = [t for _, _, r in docs for t in r]
    q = len(tables[0])
    if any(len(t) != q for t in tables):
        sys.exit("merge_calibrations: the files have different numbers of quantiles")
    wake = [statistics.median(t[i] for t in tables) for i in range(q)]
    out = dict(docs[0][1])
    out["command"] = "scripts/merge_calibrations.py " + " ".join(paths)
    out["merged"] = len(paths)
    out["loads"] = [d.get("load_before", "") for _, d, _ in docs]
    out["wake_mean_us"] = round(sum(wake) / q, 1)
    out["wake_us"] = [round(w, 1) for w in wake]
    out["wake_us_rounds"] = tables
    print(json.dumps(out))


main(sys.argv[1:])
