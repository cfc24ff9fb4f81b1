#!/usr/bin/env bash
# Lossy, slow links for real: `tinysplit run` against host boards that sit in
# their own Linux network namespaces, each joined to the coordinator's
# namespace by a veth pair whose two ends are impaired:
#   --rate R     TBF rate limit on both ends of every link (tc syntax: 10mbit)
#   --loss P%    random packet loss in each direction: a tc BPF classifier in
#                direct-action mode on the ingress of both ends
#                (scripts/netem/loss.bpf.c, built with Debian's clang), so a
#                packet is lost after it left the sender and TCP really
#                retransmits (a drop on the sender's own egress is seen by
#                its stack at once and silently re-sent: not a loss). GSO is
#                limited to one segment per packet, so each loss is one
#                segment, not a 64 KB burst
#   --delay D    (ms) and --jitter J (ms): our kernels have no netem qdisc, so
#                a small relay in the coordinator's namespace holds every byte
#                D +- J ms in each direction (scripts/netem/delay_relay.py);
#                the runs then take the relay route unless told otherwise
# Every namespace, interface and process is created here and removed on exit
# (also on Ctrl-C); traffic stays inside these namespaces. First a baseline
# run over the same namespaces without impairments, then --runs runs of
# --repeat inferences each with them; prints a JSON summary on stdout:
#   {"inferences", "bit_exact", "failures", "latency_s": {...}, ...}
# Progress goes to stderr. Exit 77 (skip) when the machine cannot create
# network namespaces (not root, no veth); with --check, exit 1 unless every
# inference was bit-exact and no run failed.
#
#   bash scripts/netem_run.sh --loss 1% --rate 10mbit --repeat 10
#   bash scripts/netem_run.sh --loss 5% --delay 10 --jitter 5 --repeat 50
#   bash scripts/netem_run.sh --boards 4 --loss 2% -- --window 8 --inject-fault kill:1:30
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TS="${TS_BIN:-$ROOT/build/tinysplit}"

BOARDS=3 LOSS=1% RATE=10mbit DELAY=0 JITTER=0 REPEAT=10 RUNS=1 TIMEOUT=10 BASELINE=1 CHECK=0
EXTRA=()
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "netem_run: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --boards) BOARDS="$2"; shift 2 ;;
    --loss) LOSS="$2"; shift 2 ;;
    --rate) RATE="$2"; shift 2 ;;
    --delay) DELAY="$2"; shift 2 ;;
    --jitter) JITTER="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --no-baseline) BASELINE=0; shift ;;
    --check) CHECK=1; shift ;;
    --json) shift ;;  # the summary is always JSON on stdout
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

# ---- arguments
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_num() { [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
is_uint "$BOARDS" && (( BOARDS >= 1 && BOARDS <= 16 )) || die "--boards: expected 1..16, got '$BOARDS'"
is_uint "$REPEAT" && (( REPEAT >= 1 )) || die "--repeat: expected a positive whole number, got '$REPEAT'"
is_uint "$RUNS" && (( RUNS >= 1 )) || die "--runs: expected a positive whole number, got '$RUNS'"
is_num "$TIMEOUT" || die "--timeout: expected seconds, got '$TIMEOUT'"
LOSS_PCT="${LOSS%\%}"
is_num "$LOSS_PCT" || die "--loss: expected a percentage like 1% or 0.5%, got '$LOSS'"
LOSS_PPM=$(awk -v p="$LOSS_PCT" 'BEGIN { printf "%d", p * 10000 + 0.5 }')
(( LOSS_PPM <= 500000 )) || die "--loss: at most 50%, got '$LOSS'"
DELAY="${DELAY%ms}" JITTER="${JITTER%ms}"
is_num "$DELAY" || die "--delay: expected milliseconds like 10 or 10ms, got '$DELAY'"
is_num "$JITTER" || die "--jitter: expected milliseconds like 5 or 5ms, got '$JITTER'"
awk -v d="$DELAY" -v j="$JITTER" 'BEGIN { exit !(j <= d) }' || die "--jitter must not exceed --delay"
if [[ "$RATE" == 0 || "$RATE" == off ]]; then RATE=""; fi
[[ -z "$RATE" || "$RATE" =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|bps|kbps|mbps)$ ]] ||
  die "--rate: expected a tc rate like 10mbit or 500kbit (or off), got '$RATE'"
USE_RELAY=0
awk -v d="$DELAY" 'BEGIN { exit !(d > 0) }' && USE_RELAY=1
if (( USE_RELAY )) && [[ " ${EXTRA[*]-} " == *" direct "* ]]; then
  die "--delay with --route direct is not supported: the relay sits between the coordinator and the boards only"
fi
# The relay's addresses (the coordinator's loopback) are what the boards
# would be told of each other on the direct route, and they cannot reach
# them there: with --delay the runs take the relay route unless told.
if (( USE_RELAY )) && [[ " ${EXTRA[*]-} " != *" --route "* ]]; then
  EXTRA+=(--route relay)
fi
[[ -x "$TS" ]] || die "no tinysplit binary at $TS (build first, or set TS_BIN)"

# ---- can this machine make network namespaces? (else skip, exit 77)
skip() { echo "netem_run: SKIP: $*" >&2; exit 77; }
[[ $EUID -eq 0 ]] || skip "needs root to create network namespaces"
need=()
command -v ip >/dev/null && command -v tc >/dev/null || need+=(iproute2)
if (( LOSS_PPM > 0 )); then command -v clang >/dev/null || need+=(clang); fi
[[ -x /usr/bin/python3 ]] || need+=(python3)
if [[ ${#need[@]} -gt 0 ]]; then
  echo "netem_run: installing ${need[*]}" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" ||
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"; }; } \
    >"${TMPDIR:-/tmp}/tinysplit-netem-apt.log" 2>&1 || die "could not install ${need[*]} (log: ${TMPDIR:-/tmp}/tinysplit-netem-apt.log)"
fi
P="tsn$$"
ip netns add "${P}probe" 2>/dev/null || skip "this kernel or sandbox does not allow network namespaces (ip netns add failed)"
if ! ip -n "${P}probe" link add "${P}x" type veth peer name "${P}y" 2>/dev/null; then
  ip netns del "${P}probe"; skip "no veth support"
fi
ip netns del "${P}probe"

# ---- set-up, and clean-up on every exit
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tinysplit-netem-XXXXXX")"
PIDS=()
NETNS=()
cleanup() {
  local pid ns
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
say() { echo "netem_run: $*" >&2; }

C="${P}c"
ip netns add "$C"; NETNS+=("$C")
ip -n "$C" link set lo up
ip netns exec "$C" sysctl -qw net.ipv4.ip_forward=1   # boards reach each other through it (--route direct)
DEVS=()   # "namespace device" of every impaired end
for ((i = 0; i < BOARDS; i++)); do
  B="${P}b$i"
  ip netns add "$B"; NETNS+=("$B")
  ip -n "$B" link set lo up
  ip link add "${P}c$i" netns "$C" type veth peer name "${P}b$i" netns "$B"
  ip -n "$C" addr add "10.213.$i.1/24" dev "${P}c$i"
  ip -n "$B" addr add "10.213.$i.2/24" dev "${P}b$i"
  # One segment per packet: a drop loses one segment, as on a real link.
  ip -n "$C" link set dev "${P}c$i" gso_max_segs 1
  ip -n "$B" link set dev "${P}b$i" gso_max_segs 1
  ip -n "$C" link set "${P}c$i" up
  ip -n "$B" link set "${P}b$i" up
  ip -n "$B" route add default via "10.213.$i.1"
  DEVS+=("$C ${P}c$i" "$B ${P}b$i")
done

# Boards: standalone `tinysplit worker`s, one per namespace.
for ((i = 0; i < BOARDS; i++)); do
  ip netns exec "${P}b$i" "$TS" worker --listen "10.213.$i.2:7000" --id "$i" --store "$WORK/board$i" \
    >"$WORK/board$i.log" 2>&1 &
  PIDS+=($!)
done
for ((i = 0; i < BOARDS; i++)); do
  for ((t = 0; t < 100; t++)); do grep -q listening "$WORK/board$i.log" 2>/dev/null && break; sleep 0.1; done
  grep -q listening "$WORK/board$i.log" || die "board $i did not start: $(head -c 300 "$WORK/board$i.log")"
done

# Testbeds: straight to the boards, and (with --delay) through the relay.
testbed() {  # $1 = file, $2 = relay (0/1)
  {
    echo '{"boards": ['
    for ((i = 0; i < BOARDS; i++)); do
      local addr="10.213.$i.2:7000"
      (( $2 )) && addr="127.0.0.1:$((7100 + i))"
      printf '  {"id": %d, "address": "%s"}%s\n' "$i" "$addr" "$([[ $i -lt $((BOARDS - 1)) ]] && echo ,)"
    done
    echo ']}'
  } >"$1"
}
testbed "$WORK/direct.json" 0
testbed "$WORK/relay.json" 1

# One `tinysplit run` in the coordinator's namespace; bounded in time.
RUN_LIMIT=$(awk -v r="$REPEAT" -v t="$TIMEOUT" 'BEGIN { printf "%d", 300 + r * (30 + 4 * t) }')
# In the background and waited for: a signal to this script is handled at
# once (bash defers traps while a foreground command runs), and the clean-up
# ends the run too.
run_once() {  # $1 = testbed, $2 = output prefix
  timeout --kill-after=10 "$RUN_LIMIT" ip netns exec "$C" "$TS" run --testbed "$1" --json --repeat "$REPEAT" \
    --timeout "$TIMEOUT" "${EXTRA[@]}" >"$2.json" 2>"$2.err" &
  local pid=$! rc=0
  PIDS+=("$pid")
  wait "$pid" || rc=$?
  echo "$rc" >"$2.rc"
}
retrans() {  # TCP segments retransmitted in every namespace so far
  local ns total=0 n
  for ns in "${NETNS[@]}"; do
    n=$(ip netns exec "$ns" awk '/^Tcp:/ { if (h) { for (i = 1; i <= NF; i++) if (k[i] == "RetransSegs") print $i } else { for (i = 1; i <= NF; i++) k[i] = $i; h = 1 } }' /proc/net/snmp)
    total=$((total + ${n:-0}))
  done
  echo "$total"
}

if (( BASELINE )); then
  say "baseline: $BOARDS boards, no impairment, $REPEAT inferences"
  run_once "$WORK/direct.json" "$WORK/baseline"
fi

# ---- impair the links
if (( LOSS_PPM > 0 )); then
  clang -O2 -target bpf -DLOSS_PPM="$LOSS_PPM" -c "$ROOT/scripts/netem/loss.bpf.c" -o "$WORK/loss.o"
fi
for d in "${DEVS[@]}"; do
  read -r ns dev <<<"$d"
  if [[ -n "$RATE" ]]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$RATE" burst 32kb latency 200ms
  fi
  if (( LOSS_PPM > 0 )); then
    ip netns exec "$ns" tc qdisc add dev "$dev" clsact
    ip netns exec "$ns" tc filter add dev "$dev" ingress bpf da obj "$WORK/loss.o" sec classifier
  fi
done
TB="$WORK/direct.json"
if (( USE_RELAY )); then
  pairs=()
  for ((i = 0; i < BOARDS; i++)); do pairs+=("127.0.0.1:$((7100 + i))=10.213.$i.2:7000"); done
  ip netns exec "$C" /usr/bin/python3 "$ROOT/scripts/netem/delay_relay.py" --delay-ms "$DELAY" --jitter-ms "$JITTER" \
    "${pairs[@]}" >"$WORK/relay.log" 2>&1 &
  PIDS+=($!)
  for ((t = 0; t < 100; t++)); do grep -q "relay ready" "$WORK/relay.log" 2>/dev/null && break; sleep 0.1; done
  grep -q "relay ready" "$WORK/relay.log" || die "the delay relay did not start: $(head -c 300 "$WORK/relay.log")"
  TB="$WORK/relay.json"
fi

R0=$(retrans)
for ((k = 1; k <= RUNS; k++)); do
  say "run $k/$RUNS: loss ${LOSS_PCT}%, rate ${RATE:-unlimited}, delay ${DELAY} ms +- ${JITTER} ms, $REPEAT inferences"
  run_once "$TB" "$WORK/run$k"
  if [[ "$(cat "$WORK/run$k.rc")" != 0 ]]; then say "run $k failed: $(tail -n 1 "$WORK/run$k.err")"; fi
done
R1=$(retrans)

# ---- summary
/usr/bin/python3 - "$WORK" "$RUNS" "$BASELINE" "$BOARDS" "$LOSS_PCT" "${RATE:-}" "$DELAY" "$JITTER" "$REPEAT" "$((R1 - R0))" \
  "${EXTRA[*]-}" >"$WORK/summary.json" <<'EOF'
import json, statistics, sys
work, runs, baseline, boards, loss, rate, delay, jitter, repeat, retrans, extra = sys.argv[1:]
def load(prefix):
    rc = int(open(f"{work}/{prefix}.rc").read())
    err = open(f"{work}/{prefix}.err").read().strip().splitlines()
    j = None
    if rc == 0:
        try:
            j = json.load(open(f"{work}/{prefix}.json"))
        except ValueError:
            rc = -1
    return rc, j, (err[-1] if err else "")
out = {"boards": int(boards), "loss_percent": float(loss), "rate": rate or None, "delay_ms": float(delay),
       "jitter_ms": float(jitter), "runs": int(runs), "repeat": int(repeat), "run_args": extra,
       "inferences": 0, "bit_exact": 0, "failures": 0, "errors": [], "failovers": 0,
       "tcp_retransmitted_segments": int(retrans)}
lat = []
for k in range(1, int(runs) + 1):
    rc, j, err = load(f"run{k}")
    if j is None:
        out["failures"] += 1
        out["errors"].append(err or f"exit status {rc}")
        continue
    out["inferences"] += j["inferences"]
    out["bit_exact"] += j["bit_exact_inferences"]
    out["failovers"] += len(j.get("failovers", []))
    lat.append(j["latency_s"]["total"])
out["latency_s"] = {"median": statistics.median(lat) if lat else None}
if int(baseline):
    rc, j, err = load("baseline")
    if j is None:
        out["failures"] += 1
        out["errors"].append("baseline: " + (err or f"exit status {rc}"))
        out["latency_s"]["baseline_median"] = None
    else:
        b = j["latency_s"]["total"]
        out["latency_s"]["baseline_median"] = b
        out["baseline_bit_exact"] = j["bit_exact_inferences"] == j["inferences"]
        if lat:
            out["latency_s"]["ratio"] = round(out["latency_s"]["median"] / b, 2)
print(json.dumps(out, indent=2))
EOF
cat "$WORK/summary.json"
if (( CHECK )); then
  /usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s["failures"] == 0 and s["inferences"] > 0 and s["bit_exact"] == s["inferences"] else 1)' \
    "$WORK/summary.json" || { say "check failed: not every inference was bit-exact, or a run failed"; exit 1; }
fi
