#!/usr/bin/env bash
# Where a firmware board's instructions go, per function, per inference
# (docs/firmware.md, "Board to board under QEMU"): a QEMU plugin
# (scripts/qemu_profile/tb_counts.cpp, built here with g++) counts the
# instructions of every translation block the boards execute; two runs of
# the same plan, with R and 2R+1 inferences on fresh boards, differ by R+1
# inferences and nothing else (deploy, boot, connections cancel out); the
# difference, divided by R+1, is attributed to the functions of the image
# (arm-none-eabi-nm) and summed over the boards. Under -icount (the
# default for QEMU boards) the counts do not depend on the machine's load.
#
#   bash scripts/qemu_profile.sh [--top N] [--repeat R] [--image ELF] -- RUN-OPTIONS
#   e.g. bash scripts/qemu_profile.sh -- --size 112 --workers qemu:3 --route direct --strategy auto --code off
#
# Prints "instructions per inference (all boards), share, function" for the
# N (default 40) largest, then the total. The run options go to `tinysplit
# run` as they are (--repeat, --json and --store are the script's).
# Environment: TS_FIRMWARE (the image QEMU boards boot; default the M7's),
# TINYSPLIT (the binary; default build/tinysplit).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOP=40
REPEAT=10
IMAGE=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --top) TOP="${2:?--top needs a count}"; shift 2 ;;
    --repeat) REPEAT="${2:?--repeat needs a count}"; shift 2 ;;
    --image) IMAGE="${2:?--image needs an ELF}"; shift 2 ;;
    --) shift; break ;;
    *) echo "qemu_profile: unknown option '$1' (run options go after --)" >&2; exit 2 ;;
  esac
done
[[ "$TOP" =~ ^[0-9]+$ && "$REPEAT" =~ ^[0-9]+$ && "$REPEAT" -ge 1 ]] ||
  { echo "qemu_profile: --top and --repeat take positive counts" >&2; exit 2; }
BIN="${TINYSPLIT:-$ROOT/build/tinysplit}"
export TS_FIRMWARE="${IMAGE:-${TS_FIRMWARE:-$ROOT/firmware/build/tinysplit-board.elf}}"
[[ -x "$BIN" ]] || { echo "qemu_profile: build tinysplit first (cmake --build build --target tinysplit)" >&2; exit 2; }
[[ -f "$TS_FIRMWARE" ]] || { echo "qemu_profile: no firmware at $TS_FIRMWARE (bash scripts/build_firmware.sh)" >&2; exit 2; }
for tool in g++ arm-none-eabi-nm qemu-system-arm /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "qemu_profile: $tool is missing" >&2; exit 2; }
done
OUT="$(mktemp -d /tmp/ts_qemu_profile.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
g++ -O2 -shared -fPIC -o "$OUT/tb_counts.so" "$ROOT/scripts/qemu_profile/tb_counts.cpp" -lpthread
cat > "$OUT/qemu" <<EOF
#!/bin/sh
exec qemu-system-arm -plugin "$OUT/tb_counts.so" "\$@"
EOF
chmod +x "$OUT/qemu"
for n in "$REPEAT" "$((2 * REPEAT + 1))"; do
  mkdir -p "$OUT/counts-$n"
  TS_QEMU="$OUT/qemu" TS_TB_COUNTS="$OUT/counts-$n/tb" \
    "$BIN" run "$@" --repeat "$n" --json --store "$OUT/store-$n" > "$OUT/run-$n.json" 2> "$OUT/run-$n.err" ||
    { echo "qemu_profile: tinysplit run failed: $(tail -1 "$OUT/run-$n.err")" >&2; exit 1; }
  sleep 1.5  # the plugin's last write as QEMU exits
  ls "$OUT/counts-$n"/tb.* >/dev/null 2>&1 || { echo "qemu_profile: no counts (are the boards QEMU boards?)" >&2; exit 1; }
done
/usr/bin/python3 - "$TS_FIRMWARE" "$OUT/counts-$REPEAT" "$OUT/counts-$((2 * REPEAT + 1))" "$((REPEAT + 1))" "$TOP" \
  "$OUT/run-$((2 * REPEAT + 1)).json" <<'EOF'
import bisect, collections, glob, json, subprocess, sys
elf, a_dir, b_dir, per, top, run_json = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
run = json.load(open(run_json))
if not run.get("match_reference"):
    sys.exit("qemu_profile: the run was not bit-exact")
syms = []
for line in subprocess.run(["arm-none-eabi-nm", "-C", "-n", "-S", elf], capture_output=True, text=True, check=True).stdout.splitlines():
    p = line.split(None, 3)
    if len(p) == 4 and p[2] in "tTwW":
        syms.append((int(p[0], 16), int(p[1], 16), p[3]))
syms.sort()
starts = [s[0] for s in syms]
def counts(d):
    c = collections.Counter()
    for f in glob.glob(d + "/tb.*"):
        for line in open(f):
            pc, n, runs = line.split()
            pc = int(pc, 16) & ~1
            i = bisect.bisect_right(starts, pc) - 1
            name = syms[i][2] if i >= 0 and pc < syms[i][0] + max(syms[i][1], 1) else "(no symbol)"
            c[name] += int(n) * int(runs)
    return c
a, b = counts(a_dir), counts(b_dir)
d = {k: (b[k] - a.get(k, 0)) / per for k in b}
total = sum(d.values())
print(f"{'instructions':>14} {'share':>7}  function (per inference, summed over the boards)")
for name, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]:
    print(f"{v:14,.0f} {100 * v / total:6.2f}%  {name[:110]}")
print(f"{total:14,.0f}  total")
EOF
