#!/usr/bin/python3
"""Reruns the planner's and the simulator's figures that the docs quote.

Every figure here comes from `tinysplit plan` or `tinysplit simulate`: both
are exact (they do not depend on the machine), so the output is the same on
every machine for one tree. The runs that measure boards (`run`) are not
here; their commands are beside their figures in the docs.

    /usr/bin/python3 scripts/doc_figures.py [--bin build/tinysplit] [--only NAME]

NAME is one of the sections printed (readme, fused, stream, paper, coding,
sweep). Each section prints the doc it feeds and the commands it ran.
"""
import argparse
import json
import subprocess
import sys

BIN = "build/tinysplit"


def ts(args):
    cmd = [BIN] + args.split()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("doc_figures: `%s` failed: %s" % (" ".join(cmd), r.stderr.strip()))
    return json.loads(r.stdout)


def plan(args):
    return ts("plan --json " + args)


def sweep(args):
    """`simulate --sweep ... --json`: {workers: record}."""
    j = ts("simulate --json " + args)
    runs = j["runs"] if isinstance(j, dict) and "runs" in j else j
    return {r["workers"]: r for r in runs}


def b(n):
    return "{:,} B".format(int(n))


def peak(p):
    return max(w["peak_ram_bytes"] for w in p["workers"])


def fused_blocks(p):
    names = sorted({l["name"].split("_")[1] for l in p["per_layer"]
                    if l.get("strategy") in ("fused", "fused-rows") and l["name"].startswith("block_")}, key=int)
    return ", ".join(names) if names else "none"


def lat(r):
    return r["latency_s"]["total"]


def section(name, doc, cmds):
    print("\n## %s (%s)" % (name, doc))
    for c in cmds:
        print("    tinysplit " + c)


def readme():
    section("readme", "README.md, the figures table", ["simulate --size 112 --sweep 3,8 [--code off]",
                                                       "plan --size 112 --workers N [--strategy fused|fused-rows]",
                                                       "plan --workers 1 [--size 112]"])
    d, off = sweep("--size 112 --sweep 3,8"), sweep("--size 112 --sweep 3,8 --code off")
    paper = sweep("--size 112 --sweep 3,8 --strategy neuron --route relay")
    fused_runs = {}
    for s in ("fused", "fused-rows"):
        fused_runs[s] = (sweep("--size 112 --sweep 3,8 --strategy " + s),
                         sweep("--size 112 --sweep 3,8 --strategy %s --code off" % s))
    for n in (3, 8):
        p = plan("--size 112 --workers %d" % n)
        line = ("%d boards: auto %s, simulated %.4f s (code off %.4f s); paper's mode %.4f s"
                % (n, b(p["total_wire_bytes"]), lat(d[n]), lat(off[n]), lat(paper[n])))
        for s, (fd, foff) in fused_runs.items():
            f = plan("--size 112 --workers %d --strategy %s" % (n, s))
            line += "; %s %s, %.4f s (off %.4f s)" % (s, b(f["total_wire_bytes"]), lat(fd[n]), lat(foff[n]))
        print(line)
    for size in (224, 112):
        p = plan("--size %d --workers 1" % size)
        print("1 board at %d: peak RAM %s" % (size, b(peak(p))))
    s224 = sweep("--sweep 3")
    print("224 on 3 boards: simulated %.4f s" % lat(s224[3]))


def fused():
    section("fused", "docs/planner.md, Fused tiles", ["plan --size 112 --workers N --strategy S",
                                                      "simulate --size 112 --sweep 3,8 --strategy S --code off"])
    print("| boards | spatial | fused | fused-rows | auto (fused blocks) |")
    print("|---|---|---|---|---|")
    for n in (3, 8, 16):
        row = []
        for s in ("spatial", "fused", "fused-rows", "auto"):
            p = plan("--size 112 --workers %d --strategy %s" % (n, s))
            cell = "%s, %.4f s" % (b(p["total_wire_bytes"]), p["est_latency_s"])
            cell += " (block %s)" % fused_blocks(p) if s == "auto" else ", " + b(peak(p))
            row.append(cell)
        print("| %d | %s |" % (n, " | ".join(row)))
    for s in ("fused", "fused-rows", "auto"):
        r = sweep("--size 112 --sweep 3,8 --strategy %s --code off" % s)
        print("simulated %s: %.4f / %.4f s" % (s, lat(r[3]), lat(r[8])))


def stream():
    section("stream", "docs/planner.md, streamed chains", ["plan --stream off|on ARGS"])
    print("| ARGS | off | on |")
    print("|---|---|---|")
    for args in ("--size 112 --workers 1", "--size 112 --workers 3", "--size 112 --workers 8",
                 "--size 224 --workers 3", "--size 224 --workers 8"):
        cells = []
        for mode in ("off", "on"):
            p = plan("--stream %s %s" % (mode, args))
            c = "%s, %.4f s, %s" % (b(p["total_wire_bytes"]), p["est_latency_s"], b(peak(p)))
            if mode == "on":
                rec = sum(w.get("recomputed_macs", 0) for w in p["workers"])
                c += ", %.1f M recomputed, %d layers" % (rec / 1e6, p["stream"]["layers"])
            cells.append(c)
        print("| `%s` | %s |" % (args, " | ".join(cells)))


def paper():
    section("paper", "docs/planner.md, against the paper",
            ["plan --size 112 --workers N --strategy S --route R",
             "simulate --size 112 --sweep 2,3,4,8,10,16 [--strategy neuron --route relay]"])
    counts = "2,3,4,8,10,16"
    sa, sp = sweep("--size 112 --sweep " + counts), sweep("--size 112 --sweep %s --strategy neuron --route relay" % counts)
    print("| boards | paper (`neuron`, relay) | `spatial`, direct | `auto`, direct | auto's bytes vs paper | simulated: paper / `auto` |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in map(int, counts.split(",")):
        pp = plan("--size 112 --workers %d --strategy neuron --route relay" % n)
        sp_ = plan("--size 112 --workers %d --strategy spatial" % n)
        au = plan("--size 112 --workers %d" % n)
        print("| %d | %s, %.3f s | %s, %.3f s | %s, %.3f s | %.1f %% | %.3f / %.3f s |"
              % (n, b(pp["total_wire_bytes"]), pp["est_latency_s"], b(sp_["total_wire_bytes"]), sp_["est_latency_s"],
                 b(au["total_wire_bytes"]), au["est_latency_s"], 100.0 * au["total_wire_bytes"] / pp["total_wire_bytes"],
                 lat(sp[n]), lat(sa[n])))
        if n in (3, 8):
            print("    (auto's fused blocks at %d: %s)" % (n, fused_blocks(au)))


def coding():
    section("coding", "docs/coding.md", ["simulate --size 112 --sweep 1,2,3,4,8,16,32,64 --code C",
                                         "plan --size 112 --workers N (coding)"])
    runs = {c: sweep("--size 112 --sweep 1,2,3,4,8,16,32,64 --code " + c) for c in ("off", "auto", "mask", "rice")}
    print("| boards | off | auto | mask | rice |")
    print("|---|---|---|---|---|")
    for n in (3, 8, 16, 32, 64):
        cells = []
        for c in ("off", "auto", "mask", "rice"):
            r = runs[c][n]
            cells.append("%.4f s, %s" % (lat(r), b(r["wire_bytes"])) if c in ("off", "auto") and n <= 16
                         else "%.4f s" % lat(r))
        print("| %d | %s |" % (n, " | ".join(cells)))
    for n in (3, 8):
        p = plan("--size 112 --workers %d" % n)
        print("plan at %d: %s coded against %s plain" % (n, b(p["coding"]["coded_bytes"]), b(p["total_wire_bytes"])))


def sim_sweep():
    section("sweep", "docs/simulator.md, latency vs boards",
            ["simulate --size 112 --sweep 1,2,3,4,8,16 --code off",
             "simulate --size 112 --sweep 1,2,3,4,8,16 --strategy neuron --route relay",
             "simulate --size 112 --sweep 1,2,3,4,8,16"])
    off = sweep("--size 112 --sweep 1,2,3,4,8,16 --code off")
    pp = sweep("--size 112 --sweep 1,2,3,4,8,16 --strategy neuron --route relay")
    auto = sweep("--size 112 --sweep 1,2,3,4,8,16")
    print("| boards | auto, direct: total (compute + comm) | payload bytes | paper mode: total |")
    print("|---:|---:|---:|---:|")
    for n in (1, 2, 3, 4, 8, 16):
        r = off[n]["latency_s"]
        print("| %d | %.3f (%.3f + %.3f) | %s | %.3f |" % (n, r["total"], r["compute"], r["communication"],
                                                        "{:,}".format(off[n]["payload_bytes"]), lat(pp[n])))
    print("code auto: " + " / ".join("%.4f" % lat(auto[n]) for n in (1, 2, 3, 4, 8, 16)) + " s on 1 / 2 / 3 / 4 / 8 / 16")


SECTIONS = {"readme": readme, "fused": fused, "stream": stream, "paper": paper, "coding": coding, "sweep": sim_sweep}


def main():
    global BIN
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=BIN)
    ap.add_argument("--only", choices=sorted(SECTIONS))
    a = ap.parse_args()
    BIN = a.bin
    for name, f in SECTIONS.items():
        if a.only in (None, name):
            f()


if __name__ == "__main__":
    main()
