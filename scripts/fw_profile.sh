#!/usr/bin/env bash
# Where the firmware's instructions go, per function, for one inference:
# runs the QEMU boards twice (two inferences, then one) with a TCG plugin
# that counts each translated block's executions
# (scripts/fw_profile/tb_count.c), subtracts the runs and puts each block's
# instructions on the function that holds it (scripts/fw_profile/attribute.py).
#
#   bash scripts/fw_profile.sh [--board N] [--top N] [-- RUN ARGS...]
#
#   --board N   the board to show (default: the one with the most instructions)
#   --top N     functions listed (default 30)
#   RUN ARGS    tinysplit run's arguments (default: --size 112 --workers qemu:3 --code off);
#               --repeat, --store and --json are the script's
#
# Needs the normal build (build/tinysplit), the firmware (scripts/build_firmware.sh) and
# QEMU's plugin header, which it takes from Debian's QEMU source package (apt-get source
# --download-only; the header alone, into build/fw_profile/) and compiles the plugin with gcc.
# The counts are guest instructions, as -icount counts them (QEMU is not cycle-accurate).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BOARD=""
TOP=30
RUN_ARGS=()
die() { echo "fw_profile: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --board) [[ $# -ge 2 ]] || die "--board needs a value"; BOARD="$2"; shift 2 ;;
    --top) [[ $# -ge 2 ]] || die "--top needs a value"; TOP="$2"; shift 2 ;;
    --) shift; RUN_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -z "$BOARD" || "$BOARD" =~ ^[0-9]+$ ]] || die "--board must be a board number"
[[ "$TOP" =~ ^[1-9][0-9]*$ ]] || die "--top must be a positive number"
((${#RUN_ARGS[@]})) || RUN_ARGS=(--size 112 --workers qemu:3 --code off)
for a in "${RUN_ARGS[@]}"; do
  case "$a" in --repeat|--store|--json) die "$a is set by the script" ;; esac
done
TS="$ROOT/build/tinysplit"
[[ -x "$TS" ]] || die "no build/tinysplit (bash scripts/setup.sh)"
ELF="${TS_FIRMWARE:-$ROOT/firmware/build/tinysplit-board.elf}"
[[ -f "$ELF" ]] || die "no firmware image $ELF (bash scripts/build_firmware.sh)"
command -v qemu-system-arm >/dev/null || die "qemu-system-arm is not installed (scripts/build_firmware.sh installs it)"
command -v gcc >/dev/null || die "gcc is not installed"

OUT="$ROOT/build/fw_profile"
mkdir -p "$OUT"
HDR="$OUT/include/qemu-plugin.h"
if [[ ! -f "$HDR" ]]; then
  echo "[fw_profile] QEMU's plugin header from Debian's source package (apt-get source --download-only qemu)"
  SRC="$OUT/qemu-src"
  mkdir -p "$SRC" "$OUT/include"
  (cd "$SRC" && apt-get source --download-only qemu >"$OUT/apt-source.log" 2>&1) \
    || die "apt-get source qemu failed (a deb-src entry is needed; scripts/build_firmware.sh adds one): $OUT/apt-source.log"
  TARBALL="$(ls "$SRC"/qemu_*.orig.tar.* 2>/dev/null | head -n 1)"
  [[ -n "$TARBALL" ]] || die "no QEMU source tarball in $SRC"
  tar -xf "$TARBALL" -C "$SRC" --wildcards '*/include/qemu/qemu-plugin.h' || die "no qemu-plugin.h in $TARBALL"
  cp "$(find "$SRC" -name qemu-plugin.h | head -n 1)" "$HDR"
  rm -rf "$SRC"
fi
PLUGIN="$OUT/tb_count.so"
gcc -O2 -Wall -shared -fPIC -I"$OUT/include" -o "$PLUGIN" "$ROOT/scripts/fw_profile/tb_count.c" -lpthread \
  || die "compiling the plugin failed"
# QEMU through a wrapper that loads the plugin, one counts file per QEMU process.
WRAP="$OUT/qemu-with-counts"
cat >"$WRAP" <<WRAPEOF
#!/bin/sh
exec qemu-system-arm -plugin "$PLUGIN,out=\$TS_FW_PROFILE_DIR/counts-\$\$.txt" "\$@"
WRAPEOF
chmod +x "$WRAP"

run() {  # run R DIR: R inferences, counts in DIR, one file per board in board order
  local r="$1" dir="$2"
  rm -rf "$dir"; mkdir -p "$dir"
  echo "[fw_profile] tinysplit run ${RUN_ARGS[*]} --repeat $r"
  (cd "$ROOT" && TS_QEMU="$WRAP" TS_FW_PROFILE_DIR="$dir" timeout 1200 "$TS" run "${RUN_ARGS[@]}" --repeat "$r" \
     --store "$dir/store" --json >"$dir/run.json" 2>"$dir/run.err") || { tail -5 "$dir/run.err" >&2; die "the run failed"; }
  /usr/bin/python3 - "$dir/run.json" <<'PYEOF' || die "the run was not bit-exact"
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d.get("bit_exact_inferences", 0) >= 1 else 1)
PYEOF
}
run 2 "$OUT/two"
run 1 "$OUT/one"
# QEMU processes started in board order: their process ids sort so.
mapfile -t TWO < <(ls "$OUT/two"/counts-*.txt | sort -t- -k2 -n)
mapfile -t ONE < <(ls "$OUT/one"/counts-*.txt | sort -t- -k2 -n)
((${#TWO[@]} == ${#ONE[@]} && ${#TWO[@]} > 0)) || die "the two runs left different numbers of count files"
if [[ -z "$BOARD" ]]; then
  best=-1
  for i in "${!TWO[@]}"; do
    n="$(/usr/bin/python3 "$ROOT/scripts/fw_profile/attribute.py" "$ELF" "${TWO[$i]}" --minus "${ONE[$i]}" --top 1 | sed -n 1p | tr -dc 0-9)"
    if ((n > best)); then best=$n; BOARD=$i; fi
  done
fi
((BOARD < ${#TWO[@]})) || die "--board $BOARD: the run had ${#TWO[@]} boards"
echo "[fw_profile] board $BOARD, one inference (the run of 2 minus the run of 1):"
/usr/bin/python3 "$ROOT/scripts/fw_profile/attribute.py" "$ELF" "${TWO[$BOARD]}" --minus "${ONE[$BOARD]}" --top "$TOP"
