#!/usr/bin/env bash
# Measures a QEMU board kind's kernels per op kind (-icount shift=0: exactly
# one virtual ns per guest instruction) and writes data/costs/<target>.json,
# the per-op figures the planner and the simulator read for that kind
# (docs/firmware.md, "Measurements"; docs/kernels.md, "Cortex-M7 kernels").
#
#   bash scripts/board_costs.sh [--kind qemu-m7|qemu-m4|qemu-m55] [--build-dir build] [--out FILE] [--protocol-only]
#   --protocol-only: only the protocol fit (step 5), written into the existing
#   file's "protocol_instructions", its kernel figures kept as they are
#   TS_BOARD_LAYERS=layers.md bash scripts/board_costs.sh   # also the per-layer table (docs/firmware.md)
#
# Kinds (each as its row in src/plan/board_kind.cpp: firmware board, QEMU
# machine, image, the costs file it names):
#   qemu-m7  mps2-an500  firmware/build/tinysplit-board.elf        -> data/costs/cortex-m7.json (3 boards)
#   qemu-m4  mps2-an386  firmware/build/mps2-an386/tinysplit-m4.elf -> data/costs/cortex-m4.json
#            (11 boards: with the rating allocation 10 of its 384 KB flashes do not hold the weights)
#   qemu-m55 mps3-an547  firmware/build/mps3-an547/tinysplit-m55.elf -> data/costs/cortex-m55.json (3 boards;
#            its fast kernels are the Helium table, KERNELS=helium)
#
# Needs the firmware toolchain and lwIP source (bash scripts/build_firmware.sh
# once) and a host build with the tinysplit binary. Steps:
#   1. two firmware images of the kind from the same tree: its fast kernels (KERNELS=dsp,
#      or helium on the M55; firmware/build, the default image) and KERNELS=portable
#      (firmware/build-portable)
#   2. `selftest --split 3` on the DSP image where the board's RAM holds the
#      suite (the M7): the kernel suite computed with both tables on the same
#      inputs (must agree bit for bit)
#   3. for each image, `tinysplit run` of MobileNetV2 at 112 on N QEMU boards
#      of the kind (must match the int8 reference); the boards log instructions
#      per layer and kind, summed here over the boards
#   4. the JSON: the DSP image's figures in the schema's fields, the portable
#      image's beside them; "other" (no such layer in MobileNetV2) comes from
#      the selftest's Pad layer when there is one.
#   5. the boards' CPU outside the kernels (core/layer_work.h): plans of
#      several strategies and board counts run twice each; the boards' logged
#      instructions outside the kernels and pieces per layer go to
#      scripts/protocol_fit.py, whose prices go in "protocol_instructions"
#      (read by the planner and the simulator with --protocol-cpu on).
# Takes about 1 minute for the M7 on a 2-core machine (both images already built: 30 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
KIND=qemu-m7
OUT=""
PROTOCOL_ONLY=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kind) KIND="${2:?}"; shift 2 ;;
    --build-dir) BUILD_DIR="$(cd "${2:?}" && pwd)"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    --protocol-only) PROTOCOL_ONLY=1; shift ;;
    *) echo "board_costs: unknown option '$1' (--kind KIND, --build-dir DIR, --out FILE)" >&2; exit 2 ;;
  esac
done
# kind -> firmware board, QEMU machine, image below firmware/<build>/, costs target, boards, selftest
case "$KIND" in
  qemu-m7) FW_BOARD=mps2-an500; MACHINE=mps2-an500; IMAGE=tinysplit-board.elf; TARGET=cortex-m7; NBOARDS=3; SELFTEST=1; FAST=dsp ;;
  qemu-m4) FW_BOARD=mps2-an386; MACHINE=mps2-an386; IMAGE=mps2-an386/tinysplit-m4.elf; TARGET=cortex-m4; NBOARDS=11; SELFTEST=0; FAST=dsp ;;
  qemu-m55) FW_BOARD=mps3-an547; MACHINE=mps3-an547; IMAGE=mps3-an547/tinysplit-m55.elf; TARGET=cortex-m55; NBOARDS=3; SELFTEST=0; FAST=helium ;;
  *) echo "board_costs: unknown kind '$KIND' (qemu-m7, qemu-m4, qemu-m55)" >&2; exit 2 ;;
esac
[[ -n "$OUT" ]] || OUT="$ROOT/data/costs/$TARGET.json"
LAYERS_OUT="${TS_BOARD_LAYERS:-${TS_M7_LAYERS:-}}"
TS="$BUILD_DIR/tinysplit"
[[ -x "$TS" ]] || { echo "board_costs: no $TS (build the host tree first)" >&2; exit 1; }
command -v qemu-system-arm >/dev/null || { echo "board_costs: qemu-system-arm missing (bash scripts/build_firmware.sh)" >&2; exit 1; }
LWIP_DIR="$(ls -d "$ROOT"/firmware/third_party/lwip-*/ 2>/dev/null | head -1)"
[[ -n "$LWIP_DIR" ]] || { echo "board_costs: no lwIP source (bash scripts/build_firmware.sh)" >&2; exit 1; }
JOBS="${TS_FW_JOBS:-2}"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "[board_costs] $KIND firmware images (BOARD=$FW_BOARD, KERNELS=$FAST and KERNELS=portable)"
make -s -C "$ROOT/firmware" -j"$JOBS" LWIP_DIR="${LWIP_DIR%/}" BOARD="$FW_BOARD" KERNELS="$FAST" BUILD=build \
  >"$TMP/make-dsp.log" 2>&1 || { tail -20 "$TMP/make-dsp.log" >&2; exit 1; }
make -s -C "$ROOT/firmware" -j"$JOBS" LWIP_DIR="${LWIP_DIR%/}" BOARD="$FW_BOARD" KERNELS=portable BUILD=build-portable \
  >"$TMP/make-portable.log" 2>&1 || { tail -20 "$TMP/make-portable.log" >&2; exit 1; }
DSP_ELF="$ROOT/firmware/build/$IMAGE"
PORTABLE_ELF="$ROOT/firmware/build-portable/$IMAGE"

: >"$TMP/selftest.log"
if [[ $SELFTEST == 1 && $PROTOCOL_ONLY == 0 ]]; then
  echo "[board_costs] selftest (kernel suite, DSP vs portable on the same inputs)"
  timeout 300 qemu-system-arm -M "$MACHINE" -nographic -monitor none -serial null -semihosting -icount shift=0 \
    -kernel "$DSP_ELF" -append "selftest --split 3" >"$TMP/selftest.log" 2>&1 \
    || { cat "$TMP/selftest.log" >&2; echo "board_costs: selftest failed" >&2; exit 1; }
fi

for v in dsp portable; do
  [[ $PROTOCOL_ONLY == 0 ]] || break
  elf="$DSP_ELF"; [[ $v == portable ]] && elf="$PORTABLE_ELF"
  label=$v; [[ $v == dsp ]] && label=$FAST
  echo "[board_costs] MobileNetV2 112 on $NBOARDS $KIND boards, $label kernels"
  # The image of the kind: TS_FIRMWARE for the M7, TS_FIRMWARE_QEMU_M4 / _M55 for the others (coord/qemu.cpp).
  (cd "$ROOT" && TS_FIRMWARE="$elf" TS_FIRMWARE_QEMU_M4="$elf" TS_FIRMWARE_QEMU_M55="$elf" timeout 900 "$TS" run --size 112 --workers "$KIND:$NBOARDS" \
     --timeout 120 --store "$TMP/store-$v" --json >"$TMP/run-$v.json" 2>"$TMP/run-$v.err") \
     || { tail -20 "$TMP/run-$v.err" >&2; exit 1; }
  cat "$TMP"/store-$v/board-*/qemu.log >"$TMP/boards-$v.log"
done

# The boards' CPU outside the kernels (core/layer_work.h): plans with
# different pieces (strategies, board counts; plain frames), two inferences
# each; scripts/protocol_fit.py fits each board's total of the second one. A
# plan the kind's boards cannot hold is left out with a line saying so.
case "$KIND" in
  qemu-m4) FIT_PLANS="auto:$NBOARDS channel:$NBOARDS fused:$NBOARDS auto:$((NBOARDS + 1)) auto:$((NBOARDS + 3)) auto:$((NBOARDS + 5))" ;;
  *) FIT_PLANS="auto:1 auto:2 auto:3 spatial:3 rows:3 fused:3 channel:3 auto:4 auto:6 auto:8 spatial:8 rows:8" ;;
esac
FIT_RUNS=""
for run in $FIT_PLANS; do
  s="${run%%:*}"; n="${run##*:}"
  echo "[board_costs] protocol fit: MobileNetV2 112 on $n $KIND boards, --strategy $s, 2 inferences"
  if (cd "$ROOT" && TS_FIRMWARE="$DSP_ELF" TS_FIRMWARE_QEMU_M4="$DSP_ELF" TS_FIRMWARE_QEMU_M55="$DSP_ELF" timeout 900 "$TS" run --size 112 \
        --workers "$KIND:$n" --strategy "$s" --code off --repeat 2 --timeout 120 --store "$TMP/fit-$run" --json \
        >"$TMP/fit-$run.json" 2>"$TMP/fit-$run.err"); then
    FIT_RUNS="$FIT_RUNS $run"
  else
    echo "[board_costs]   $s on $n boards left out of the fit: $(tail -1 "$TMP/fit-$run.err")"
  fi
done
[[ -n "$FIT_RUNS" ]] || { echo "board_costs: no plan ran for the protocol fit" >&2; exit 1; }

mkdir -p "$(dirname "$OUT")"
/usr/bin/python3 "$ROOT/scripts/protocol_fit.py" "$TMP" "$KIND" $FIT_RUNS >"$TMP/protocol.json" \
  || { echo "board_costs: the protocol fit failed" >&2; exit 1; }
if [[ $PROTOCOL_ONLY == 1 ]]; then
  [[ -f "$OUT" ]] || { echo "board_costs: --protocol-only needs an existing $OUT" >&2; exit 1; }
  /usr/bin/python3 - "$OUT" "$TMP/protocol.json" <<'EOF'
import json, sys
out, fit = sys.argv[1], json.load(open(sys.argv[2]))
doc = json.load(open(out))
fit["fit"]["kernel_figures"] = "the file's own measurement (its source); --protocol-only refitted this block alone"
doc["protocol_instructions"] = fit
with open(out, "w") as fh:
    json.dump(doc, fh, indent=2)
    fh.write("\n")
print(f"[board_costs] protocol_instructions written into {out}: " + ", ".join(
    f"{k} {fit[k]}" for k in fit if k != "fit") + f"; boards' totals within {fit['fit']['max_board_error_pct']} %")
EOF
  exit 0
fi
/usr/bin/python3 - "$TMP" "$OUT" "$KIND" "$MACHINE" "$TARGET" "$NBOARDS" "$LAYERS_OUT" "$FAST" <<'EOF'
import json, os, re, sys
# "dsp" below names the kind's fast image (its kernels: `fast`), "portable" the portable one.
tmp, out, kind, machine, target, nboards, layers_out, fast = sys.argv[1:9]

def fields(line):
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)

def per_layer(variant):
    # Layer number -> [kind, macs, instructions] summed over the boards.
    lay = {}
    for line in open(f"{tmp}/boards-{variant}.log"):
        if not line.startswith("layer "):
            continue
        f = fields(line)
        n = int(line.split()[1])
        a = lay.setdefault(n, [f["kind"], 0, 0])
        a[1] += int(f["macs"])
        a[2] += int(f["instructions"])
    return lay

def per_kind(variant):
    run = json.load(open(f"{tmp}/run-{variant}.json"))
    if run.get("match_reference") is not True:
        sys.exit(f"board_costs: the {variant} run is not bit-exact with the int8 reference")
    agg = {}
    for line in open(f"{tmp}/boards-{variant}.log"):
        if not line.startswith("layer "):
            continue
        f = fields(line)
        a = agg.setdefault(f["kind"], {"layer_runs": 0, "macs": 0, "outputs": 0, "instructions": 0})
        a["layer_runs"] += 1
        for k in ("macs", "outputs", "instructions"):
            a[k] += int(f[k])
    if not agg:
        sys.exit(f"board_costs: no per-layer lines in the {variant} boards' logs")
    return agg

def selftest():
    res = {"dsp": {}, "portable": {}}
    for line in open(f"{tmp}/selftest.log"):
        m = re.match(r"(kernel|compare) (\S+) ", line)
        if not m or "kind=" not in line:
            continue
        f = fields(line)
        name, table = m.group(2), f["kernels"]
        res[table][name] = {"kind": f["kind"], "instructions": int(f["instructions"])}
        if m.group(1) == "kernel":
            res["macs"] = res.get("macs", {})
            res["macs"][name] = int(f["macs"])
            res.setdefault("outputs", {})[name] = int(f["outputs"]) if "outputs" in f else None
    for line in open(f"{tmp}/selftest.log"):
        if line.startswith("compare ") and "DIFFERENT" in line:
            sys.exit("board_costs: the selftest's DSP and portable results differ: " + line.strip())
    return res

def figures(agg, st, table):
    r3 = lambda x: round(x, 3)
    ipm = {}
    for k in ("conv", "depthwise", "pointwise", "linear"):
        if k in agg:
            ipm[k] = r3(agg[k]["instructions"] / agg[k]["macs"])
    ipo, src = {}, {}
    groups = {"add": ["Add"], "pool": ["GlobalAvgPool", "AvgPool", "MaxPool"]}
    known = {"conv", "depthwise", "pointwise", "linear", "Add", "GlobalAvgPool", "AvgPool", "MaxPool"}
    groups["other"] = [k for k in agg if k not in known]
    for name, kinds in groups.items():
        i = sum(agg[k]["instructions"] for k in kinds if k in agg)
        o = sum(agg[k]["outputs"] for k in kinds if k in agg)
        if o:
            ipo[name] = r3(i / o)
            src[name] = "MobileNetV2 run: " + ", ".join(k for k in kinds if k in agg)
    # Kinds the model lacks: the selftest layer of that kind.
    for name in ("add", "pool", "other"):
        if name in ipo:
            continue
        for lay, v in st[table].items():
            if v["kind"] == name and st["outputs"].get(lay):
                ipo[name] = r3(v["instructions"] / st["outputs"][lay])
                src[name] = f"selftest layer {lay}"
                break
    macs = sum(a["macs"] for a in agg.values())
    instr = sum(a["instructions"] for a in agg.values())
    return ipm, ipo, src, {"macs": macs, "instructions": instr, "instructions_per_mac": r3(instr / macs)}

def crc_ipb():
    for line in open(f"{tmp}/selftest.log"):
        if line.startswith("crc32 "):
            f = fields(line)
            return round(int(f["instructions"]) / int(f["bytes"]), 3)
    return None

st = selftest()
res, aggs = {}, {}
for v in ("dsp", "portable"):
    aggs[v] = per_kind(v)
    res[v] = figures(aggs[v], st, v)

def kernel_instructions(variant):
    # run --json's per_worker: DONE's exact instruction counts and the plan's MACs.
    run = json.load(open(f"{tmp}/run-{variant}.json"))
    ws = run["per_worker"]
    if any(w.get("kernel_instructions") is None for w in ws):
        sys.exit(f"board_costs: the {variant} run's per_worker lacks kernel_instructions")
    ki, macs = sum(w["kernel_instructions"] for w in ws), sum(w["macs"] for w in ws)
    return {"kernel_instructions": ki, "macs": macs, "ratio": round(ki / macs, 3)}

# What the planner reads (src/plan/cost.cpp): cycles per MAC per kernel kind
# and per op (MACs as src/core/op.h counts them: Add one per output), from
# the DSP run, at cycles_per_instruction.
CPI = 1.0
planner = {k: round(aggs["dsp"][k]["instructions"] / aggs["dsp"][k]["macs"] * CPI, 3)
           for k in ("conv", "pointwise", "depthwise", "linear", "Add", "GlobalAvgPool", "AvgPool", "MaxPool")
           if k in aggs["dsp"] and aggs["dsp"][k]["macs"]}
ipm, ipo, src, whole = res["dsp"]
doc = {
    "target": target,
    "source": f"bash scripts/board_costs.sh --kind {kind}: MobileNetV2 at 112 on {nboards} QEMU {machine} boards "
              "(tinysplit run), qemu-system-arm -icount shift=0, instructions per layer from the boards' logs "
              f"summed per kind; firmware KERNELS={fast}",
    "cycles_per_mac": planner,
    "cycles_per_mac_source": "instructions per MAC of the DSP run per kernel kind (conv, pointwise, depthwise, "
                             "linear) and per op (Add, GlobalAvgPool: MACs as src/core/op.h counts them) "
                             "x cycles_per_instruction; read by the planner's cost model for QEMU boards",
    "instructions_per_mac": ipm,
    "instructions_per_output": ipo,
    "kernels": fast,
    "cycles_per_instruction": CPI,
    "run_json": {v: kernel_instructions(v) for v in ("dsp", "portable")},
    "instructions_per_output_source": src,
    "whole_model": whole,
    "portable": {
        "instructions_per_mac": res["portable"][0],
        "instructions_per_output": res["portable"][1],
        "whole_model": res["portable"][3],
    },
    "selftest": {
        "command": f"qemu-system-arm -M {machine} -semihosting -icount shift=0 -kernel (the DSP image) "
                   "-append 'selftest --split 3'",
        "instructions_per_mac": {
            t: {n: round(v["instructions"] / st["macs"][n], 3) for n, v in st[t].items()} for t in ("dsp", "portable")
        },
    } if st["dsp"] else None,
    "crc32_instructions_per_byte": crc_ipb(),
    "protocol_instructions": json.load(open(f"{tmp}/protocol.json")),
    "notes": "Instructions, not cycles: QEMU counts guest instructions; 1 cycle per instruction is assumed "
             "(cycles_per_instruction). Per-output figures for add/pool/other; MACs as src/core/op.h defines them.",
}
# Figures another script measures into the same file (the activation coders'
# cycles: scripts/qemu_route_bench.sh --code-cost) are kept as they were.
if os.path.exists(out):
    before = json.load(open(out))
    for k in ("mask_cycles_per_value", "rice_cycles_per_value", "code_cycles_source"):
        if k in before:
            doc[k] = before[k]
with open(out, "w") as fh:
    json.dump(doc, fh, indent=2)
    fh.write("\n")
print(f"[board_costs] wrote {out}")
print(f"{'kind':<12}{'portable':>12}{'dsp':>10}")
for k in ("conv", "depthwise", "pointwise", "linear"):
    print(f"{k + ' /MAC':<12}{res['portable'][0].get(k, float('nan')):>12.3f}{ipm.get(k, float('nan')):>10.3f}")
for k in ("add", "pool", "other"):
    print(f"{k + ' /out':<12}{res['portable'][1].get(k, float('nan')):>12.3f}{ipo.get(k, float('nan')):>10.3f}")
print(f"crc32: {crc_ipb()} instructions per byte (selftest, 64 KiB)")
pr = doc["protocol_instructions"]
print("protocol (instructions): " + ", ".join(f"{k} {pr[k]}" for k in
      ("per_layer", "per_local_run", "per_recv_run", "per_send", "per_net_byte", "per_local_byte",
       "per_out_byte")) +
      f"; boards' totals within {pr['fit']['max_board_error_pct']} %")
print(f"{'model /MAC':<12}{res['portable'][3]['instructions_per_mac']:>12.3f}{whole['instructions_per_mac']:>10.3f}")
rj = doc["run_json"]
print(f"run --workers {kind}:{nboards} --json: sum(kernel_instructions)/sum(macs) = {rj['portable']['ratio']:.3f} portable, "
      f"{rj['dsp']['ratio']:.3f} dsp ({rj['dsp']['kernel_instructions']} / {rj['dsp']['macs']})")
layers = {v: per_layer(v) for v in ("dsp", "portable")}
names = [l.get("name", "") for l in json.load(open(f"{tmp}/run-dsp.json")).get("per_layer", [])]
with open(f"{tmp}/layers.md", "w") as fh:
    fh.write(f"| # | layer | kind | MACs ({nboards} boards) | portable instructions | DSP instructions | portable instr/MAC | DSP instr/MAC |\n")
    fh.write("|---|---|---|---:|---:|---:|---:|---:|\n")
    for n in sorted(layers["dsp"]):
        k, m, i = layers["dsp"][n]
        pi = layers["portable"].get(n, [k, m, 0])[2]
        nm = names[n] if n < len(names) else ""
        fh.write(f"| {n} | {nm} | {k} | {m:,} | {pi:,} | {i:,} | {pi / m if m else 0:.2f} | {i / m if m else 0:.2f} |\n")
if layers_out:
    import shutil
    shutil.copy(f"{tmp}/layers.md", layers_out)
    print(f"[board_costs] per-layer table (markdown) in {layers_out}")
print("selftest instructions per MAC (dsp, portable):")
for n in st["dsp"]:
    print(f"  {n:<20}{doc['selftest']['instructions_per_mac']['dsp'][n]:>8.3f}{doc['selftest']['instructions_per_mac']['portable'].get(n, float('nan')):>10.3f}")
EOF
