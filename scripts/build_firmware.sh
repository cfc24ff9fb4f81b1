#!/usr/bin/env bash
# Builds the Cortex-M7 board firmware (firmware/) for QEMU's mps2-an500 with
# the Teensy 4.1 memory layout, or (--board teensy41) for a real Teensy 4.1.
# Idempotent; run as root on Debian 12:
#   bash scripts/build_firmware.sh                   # QEMU boards: M7 (mps2-an500), M4 (mps2-an386), M55 (mps3-an547)
#   bash scripts/build_firmware.sh --board mps2-an386  # the M4 image only
#   bash scripts/build_firmware.sh --board mps3-an547  # the M55 image only
#   bash scripts/build_firmware.sh --board teensy41  # Teensy 4.1 .hex
#
# Steps (each prints one line with its time):
#   1. Debian packages: the arm-none-eabi toolchain with newlib and libstdc++
#      headers, qemu-system-arm, dpkg-dev (to unpack source packages)
#   2. a deb-src entry for the same Debian archive and suite as the machine's
#      deb entries (deb822 .sources files or one-line sources.list), if none
#   3. lwIP's and Mbed TLS's sources from Debian's source archive (`apt-get
#      source lwip`, `apt-get source mbedtls`: the firmware compiles lwIP's
#      TCP/IP stack and Mbed TLS's SHA-256) into firmware/third_party/
#      (git-ignored; never committed)
#   4. make -C firmware -> firmware/build/tinysplit-board.elf (and BOARD=mps2-an386,
#      mps3-an547 -> build/mps2-an386/tinysplit-m4.elf, build/mps3-an547/tinysplit-m55.elf)
#      (teensy41: firmware/build/teensy41/tinysplit-teensy41.elf and .hex)
#   5. boot check under QEMU (`hello`: prints the memory layout, exit code 0);
#      teensy41: scripts/check_teensy_image.py (boot header, IVT, memory map,
#      and Debian's teensy_loader_cli parses the .hex)
#
# Environment: TS_FW_JOBS (make jobs, default nproc), TS_FW_SKIP_APT=1 (no
# package installs: the toolchain, lwIP and Mbed TLS must already be there).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FW="$ROOT/firmware"
TP="$FW/third_party"
JOBS="${TS_FW_JOBS:-$(nproc)}"
PACKAGES=(gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm dpkg-dev)
BOARD=mps2-an500
while [[ $# -gt 0 ]]; do
  case "$1" in
    --board) BOARD="${2:-}"; shift 2 ;;
    --board=*) BOARD="${1#--board=}"; shift ;;
    *) echo "build_firmware: unknown option '$1' (--board mps2-an500|mps2-an386|mps3-an547|teensy41)" >&2; exit 2 ;;
  esac
done
case "$BOARD" in
  mps2-an500|mps2-an386|mps3-an547) ;;
  teensy41) PACKAGES+=(teensy-loader-cli) ;;
  *) echo "build_firmware: unknown board '$BOARD' (mps2-an500, mps2-an386, mps3-an547 or teensy41)" >&2; exit 2 ;;
esac
T0=$SECONDS
step() { T_STEP=$SECONDS; printf '[firmware] %s ... ' "$1"; }
done_step() { echo "${1:-done} ($((SECONDS - T_STEP))s)"; }
fail() { echo "FAILED"; echo "build_firmware: $*" >&2; exit 1; }

# ---- 1. packages
step "Debian packages"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  done_step "all present"
elif [[ "${TS_FW_SKIP_APT:-0}" == 1 ]]; then
  fail "missing packages and TS_FW_SKIP_APT=1: ${missing[*]}"
else
  [[ $EUID -eq 0 ]] || fail "run as root to install: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  mkdir -p "$TP"
  apt-get update -q >"$TP/apt.log" 2>&1 || { tail -20 "$TP/apt.log" >&2; fail "apt-get update failed"; }
  apt-get install -y -q --no-install-recommends "${missing[@]}" >"$TP/apt.log" 2>&1 \
    || { tail -20 "$TP/apt.log" >&2; fail "apt-get install ${missing[*]} failed"; }
  done_step "installed ${missing[*]}"
fi

# ---- 2. deb-src entry
# The source entry must name the same archive and suite as the binary one,
# so that the source version matches what the machine installs.
source_known() { apt-get source --print-uris -q "$1" >/dev/null 2>&1; }
have_lwip() { ls -d "$TP"/lwip-*/src/core >/dev/null 2>&1; }
have_mbedtls() { ls "$TP"/mbedtls-*/library/sha256.c >/dev/null 2>&1; }
step "deb-src entry"
if have_lwip && have_mbedtls; then
  done_step "not needed (lwIP and Mbed TLS sources present)"
elif source_known lwip && source_known mbedtls; then
  done_step "present"
else
  [[ "${TS_FW_SKIP_APT:-0}" != 1 ]] || fail "lwIP's or Mbed TLS's source package is unknown to apt and TS_FW_SKIP_APT=1"
  [[ $EUID -eq 0 ]] || fail "run as root to add a deb-src entry"
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
  out822=/etc/apt/sources.list.d/tinysplit-deb-src.sources
  outlist=/etc/apt/sources.list.d/tinysplit-deb-src.list
  tmp822="$(mktemp)"; tmplist="$(mktemp)"
  # deb822 stanzas whose Types include "deb" and whose Suites name this
  # release: the same stanza with "Types: deb-src".
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" && "$f" != "$out822" ]] || continue
    awk -v code="$codename" '
      function flush() {
        if (is_deb && has_code) { print "Types: deb-src"; printf "%s", body; print "" }
        body = ""; is_deb = 0; has_code = 0
      }
      /^[[:space:]]*$/ { flush(); next }
      /^[[:space:]]*#/ { next }
      /^[Tt]ypes:/ { if ($0 ~ /[[:space:]]deb([[:space:]]|$)/) is_deb = 1; next }
      /^[Ss]uites:/ { if (index($0, code) > 0) has_code = 1 }
      { body = body $0 "\n" }
      END { flush() }' "$f" >> "$tmp822"
  done
  # One-line entries: "deb [options] URI suite components" -> "deb-src ...".
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$f" && "$f" != "$outlist" ]] || continue
    grep -E "^[[:space:]]*deb[[:space:]].*[[:space:]]$codename([-[:space:]]|$)" "$f" \
      | sed -E 's/^[[:space:]]*deb[[:space:]]/deb-src /' >> "$tmplist" || true
  done
  [[ -s "$tmp822" ]] && mv "$tmp822" "$out822" || rm -f "$tmp822"
  [[ -s "$tmplist" ]] && mv "$tmplist" "$outlist" || rm -f "$tmplist"
  [[ -f "$out822" || -f "$outlist" ]] || fail "no deb entry for $codename in the apt sources to derive a deb-src entry from"
  chmod 644 "$out822" "$outlist" 2>/dev/null || true
  mkdir -p "$TP"
  apt-get update -q >"$TP/apt.log" 2>&1 || { tail -20 "$TP/apt.log" >&2; fail "apt-get update (with deb-src) failed"; }
  for src_pkg in lwip mbedtls; do
    source_known "$src_pkg" || fail "apt still knows no $src_pkg source package after adding deb-src entries"
  done
  done_step "added for $codename"
fi

# ---- 3. lwIP source
step "lwIP source (apt-get source lwip)"
if have_lwip; then
  done_step "present"
else
  mkdir -p "$TP"
  (cd "$TP" && apt-get source -q lwip >"$TP/apt-source.log" 2>&1) || { tail -20 "$TP/apt-source.log" >&2; fail "apt-get source lwip failed"; }
  done_step "$(cd "$TP" && ls -d lwip-*/ | head -1)"
fi
LWIP_DIR="$(ls -d "$TP"/lwip-*/ | head -1)"
LWIP_DIR="${LWIP_DIR%/}"
step "Mbed TLS source (apt-get source mbedtls)"
if have_mbedtls; then
  done_step "present"
else
  mkdir -p "$TP"
  (cd "$TP" && apt-get source -q mbedtls >"$TP/apt-source-mbedtls.log" 2>&1) || { tail -20 "$TP/apt-source-mbedtls.log" >&2; fail "apt-get source mbedtls failed"; }
  have_mbedtls || fail "apt-get source mbedtls gave no mbedtls-*/library/sha256.c"
  done_step "$(cd "$TP" && ls -d mbedtls-*/ | head -1)"
fi
MBEDTLS_DIR="$(ls -d "$TP"/mbedtls-*/ | head -1)"
MBEDTLS_DIR="${MBEDTLS_DIR%/}"

# ---- 4. build
if [[ "$BOARD" == teensy41 ]]; then
  step "build (make -C firmware BOARD=teensy41)"
  LOG="$FW/build-teensy41.log"
  make -C "$FW" -j"$JOBS" BOARD=teensy41 LWIP_DIR="$LWIP_DIR" MBEDTLS_DIR="$MBEDTLS_DIR" >"$LOG" 2>&1 || { tail -30 "$LOG" >&2; fail "firmware build failed (log: firmware/build-teensy41.log)"; }
  done_step "$(grep -E '^ *(ITCM|DTCM|FLASH):' "$LOG" | awk '{printf "%s %s %s  ", $1, $2, $3}')"
  # ---- 5. image check
  step "image check (scripts/check_teensy_image.py)"
  out="$(/usr/bin/python3 "$ROOT/scripts/check_teensy_image.py" "$FW/build/teensy41/tinysplit-teensy41.elf" \
          "$FW/build/teensy41/tinysplit-teensy41.hex" 2>&1)" || { echo "$out" >&2; fail "the Teensy 4.1 image is not valid"; }
  done_step "ok"
  echo "[firmware] built $FW/build/teensy41/tinysplit-teensy41.hex in $((SECONDS - T0))s"
  exit 0
fi
# The QEMU images: the Cortex-M7 (mps2-an500, the default), the Cortex-M4
# (mps2-an386) and the Cortex-M55 (mps3-an547), each built and boot-checked
# (`hello`).
qemu_image() {  # BOARD ELF
  local board="$1" elf="$2" log="$FW/build.log"
  [[ "$board" == mps2-an500 ]] || log="$FW/build-$board.log"
  step "build (make -C firmware BOARD=$board)"
  make -C "$FW" -j"$JOBS" BOARD="$board" LWIP_DIR="$LWIP_DIR" MBEDTLS_DIR="$MBEDTLS_DIR" >"$log" 2>&1 || { tail -30 "$log" >&2; fail "firmware build failed (log: ${log#"$ROOT"/})"; }
  done_step "$(grep -E '^ *(ITCM|DTCM|OCRAM|CODE|DATA|ARENA|FLASH):' "$log" | awk '{printf "%s %s %s  ", $1, $2, $3}')"
  step "boot check (qemu-system-arm -M $board, hello)"
  out="$(timeout 60 qemu-system-arm -M "$board" -nographic -monitor none -serial null -semihosting \
          -kernel "$elf" -append hello 2>&1)" || { echo "$out" >&2; fail "the $board image did not boot"; }
  grep -q 'hello: ok' <<<"$out" || { echo "$out" >&2; fail "no greeting from the $board image"; }
  done_step "ok"
  echo "[firmware] built $elf in $((SECONDS - T0))s"
}
if [[ "$BOARD" == mps2-an386 ]]; then
  qemu_image mps2-an386 "$FW/build/mps2-an386/tinysplit-m4.elf"
  exit 0
fi
if [[ "$BOARD" == mps3-an547 ]]; then
  qemu_image mps3-an547 "$FW/build/mps3-an547/tinysplit-m55.elf"
  exit 0
fi
qemu_image mps2-an500 "$FW/build/tinysplit-board.elf"
if [[ "${TS_FW_ONLY_M7:-0}" != 1 ]]; then
  qemu_image mps2-an386 "$FW/build/mps2-an386/tinysplit-m4.elf"
  qemu_image mps3-an547 "$FW/build/mps3-an547/tinysplit-m55.elf"
fi
