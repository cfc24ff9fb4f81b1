#!/usr/bin/env python3
"""Writes data/costs/cortex-m55.json (the qemu-m55 kind's measured prices, read by the planner's
cost model) from a bit-exact `tinysplit run --workers qemu-m55:3 --json --store DIR` run:
instructions per MAC per kernel kind, summed over the boards' `layer N kind=...` log lines.

  TS_FIRMWARE_QEMU_M55=firmware/build/mps3-an547/tinysplit-m55.elf \
    build/tinysplit run --workers qemu-m55:3 --json --store /tmp/m55 > /tmp/m55.json
  python3 scripts/m55_costs.py /tmp/m55 /tmp/m55.json data/costs/cortex-m55.json
"""
import glob, json, sys
store, runjson, out = sys.argv[1], sys.argv[2], sys.argv[3]
run = json.load(open(runjson))
assert run["match_reference"] is True and run["verified_layers"] == run["layers"]
agg = {}
for f in sorted(glob.glob(store + "/board-*/qemu.log")):
    for line in open(f):
        if not line.startswith("layer "):
            continue
        d = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        a = agg.setdefault(d["kind"], {"macs": 0, "instructions": 0})
        a["macs"] += int(d["macs"]); a["instructions"] += int(d["instructions"])
r3 = lambda x: round(x, 3)
cpm = {k: r3(a["instructions"] / a["macs"]) for k, a in agg.items() if a["macs"]}
ki = sum(w["kernel_instructions"] for w in run["per_worker"]); macs = sum(w["macs"] for w in run["per_worker"])
doc = {
    "target": "cortex-m55",
    "source": "MobileNetV2 at %d on 3 QEMU mps3-an547 boards: tinysplit run --workers qemu-m55:3 --json --store DIR, "
              "qemu-system-arm 7.2 -icount shift=0, instructions per layer from the boards' logs summed per kind; "
              "Helium kernels (firmware KERNELS=helium: Helium pointwise, DSP kernels for the rest)" % run.get("size", 224),
    "cycles_per_mac": cpm,
    "cycles_per_mac_source": "instructions per MAC per kernel kind and per op (Add, GlobalAvgPool: MACs as "
                             "src/core/op.h counts them) x cycles_per_instruction 1.0, as data/costs/cortex-m7.json",
    "kernels": "helium",
    "cycles_per_instruction": 1.0,
    "run_json": {"kernel_instructions": ki, "macs": macs, "ratio": r3(ki / macs)},
}
json.dump(doc, open(out, "w"), indent=2)
open(out, "a").write("\n")
print(json.dumps(doc["cycles_per_mac"]), doc["run_json"])
