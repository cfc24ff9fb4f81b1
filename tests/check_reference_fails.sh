#!/usr/bin/env bash
# The independent int8 check can fail: one element of one intermediate layer of a real C++ dump
# is changed by one; scripts/check_reference.sh --dump must exit 1 and name exactly that layer and
# element. A damaged dump file must give exit 2 with one error line. (CTest:
# IndependentInt8Reference.CheckerCatchesAChangedElement; about 2 s.)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${TS_PYTHON:-/usr/bin/python3}"
CHECK="$ROOT/scripts/check_reference.sh"
MODEL="${1:-$ROOT/tests/data/onnx/tiny.onnx}"
fail() { echo "check_reference_fails: FAIL: $*" >&2; exit 1; }

DIR="$(mktemp -d "${TMPDIR:-/tmp}/check_reference_fails.XXXXXX")" || fail "mktemp"
trap 'rm -rf "$DIR"' EXIT

# 1. The untouched dump agrees (so a later failure is caused by the change alone).
bash "$CHECK" --model "$MODEL" --size 0 --keep "$DIR/dump" >"$DIR/ok.out" 2>&1 || { cat "$DIR/ok.out"; fail "the untouched dump does not pass"; }

# 2. Change one element of the middle layer by one (wrapping at the int8 ends).
"$PY" - "$DIR/dump" >"$DIR/changed.json" <<'PYEOF' || fail "could not change the dump"
import json, sys
import numpy as np
d = sys.argv[1]
idx = json.load(open(f"{d}/index.json"))
k = len(idx["layers"]) // 2
e = idx["layers"][k]
a = np.load(f"{d}/{e['file']}")
pos = tuple(s // 2 for s in a.shape)  # an interior element
a[pos] = np.int8((int(a[pos]) + 1 + 128) % 256 - 128)
np.save(f"{d}/{e['file']}", a)
print(json.dumps({"layer": k, "name": e["name"], "element": list(pos)}))
PYEOF

bash "$CHECK" --dump "$DIR/dump" >"$DIR/bad.out" 2>&1
rc=$?
cat "$DIR/bad.out"
[ "$rc" -eq 1 ] || fail "exit status $rc after the change, expected 1"
"$PY" - "$DIR/changed.json" "$DIR/bad.out" <<'PYEOF' || fail "the report does not name the changed layer and element"
import json, sys
want = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().strip().splitlines()
got = json.loads(lines[-1])
assert got["differ"] == 1, got
assert got["layers"] > want["layer"], got
f = got["first"]
assert (f["layer"], f["name"], f["element"]) == (want["layer"], want["name"], want["element"]), (f, want)
assert f["elements_differ"] == 1 and f["max_abs_diff"] == 1, f
assert any(f"layer {want['layer']} '{want['name']}'" in l for l in lines[:-1]), lines
print("named:", f)
PYEOF

# 3. A truncated layer file is an error (exit 2, one line), not a pass or a crash.
f="$(ls "$DIR"/dump/layer_*.npy | head -1)"
head -c 20 "$f" >"$f.tmp" && mv "$f.tmp" "$f"
bash "$CHECK" --dump "$DIR/dump" >"$DIR/err.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { cat "$DIR/err.out"; fail "exit status $rc on a truncated layer file, expected 2"; }
[ "$(grep -c 'error' "$DIR/err.out")" -eq 1 ] || { cat "$DIR/err.out"; fail "expected one error line"; }
echo "check_reference_fails: ok (changed element found; truncated file refused: $(cat "$DIR/err.out"))"
