#!/usr/bin/env python3
"""Guest instructions per firmware function, from tb_count.so's block counts.

  attribute.py ELF COUNTS [--minus COUNTS2] [--top N]

COUNTS: the plugin's file(s) (address, instructions, executions per block),
comma-separated to sum boards. --minus subtracts another run's counts (e.g.
a run with one inference fewer: what is left is one inference's work).
Each block's instructions are put on the function whose symbol holds the
block's first address (arm-none-eabi-nm).
"""
import argparse, bisect, collections, subprocess, sys


def symbols(elf):
    out = subprocess.run(["arm-none-eabi-nm", "-n", "-S", "-C", elf], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[2].lower() in "tw":
            syms.append((int(parts[0], 16) & ~1, int(parts[1], 16), parts[3]))
    syms.sort()
    return syms


def counts(paths):
    total = collections.Counter()
    for path in paths.split(","):
        with open(path) as f:
            for line in f:
                a, n, e = line.split()
                total[int(a, 16)] += int(n) * int(e)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("elf")
    ap.add_argument("counts")
    ap.add_argument("--minus")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    syms = symbols(a.elf)
    starts = [s[0] for s in syms]
    per = collections.Counter()
    c = counts(a.counts)
    if a.minus:
        c.subtract(counts(a.minus))
    for addr, n in c.items():
        i = bisect.bisect_right(starts, addr & ~1) - 1
        name = "?"
        if i >= 0 and addr < syms[i][0] + max(syms[i][1], 2):
            name = syms[i][2]
        per[name] += n
    whole = sum(per.values())
    print(f"{whole:,} instructions")
    for name, n in per.most_common(a.top):
        print(f"{n:>14,} {100 * n / whole:6.2f} %  {name[:110]}")


if __name__ == "__main__":
    sys.exit(main())
