#!/usr/bin/env bash
# Prepares a fresh Debian 12 machine for tinysplit, then builds it. Run as root from anywhere:
#   bash scripts/setup.sh
# Safe to run again: every step skips what is already in place.
#
# Steps: Debian packages -> default model (models/mobilenetv2) -> photos (data/calib, data/eval)
#        -> TF.js reference runner deps (scripts/ref/node_modules) -> CMake configure + build.
#
# Environment:
#   TS_SKIP_BUILD=1   stop before configuring/building the C++ project
#   TS_BUILD_DIR=dir  build folder (default build)
#   TS_JOBS=n         parallel build jobs (default: number of cores)
#   TS_BUILD_TARGETS="t1 t2"  build only these targets (default: all of them: the tool, every
#                     test program and benchmark); scripts/test.sh builds in build/ only what it
#                     runs there, since its suite runs in the sanitized build
# Each step prints one line; the full output of a failing step is shown, other output goes to
# the log folder named at the start ($TS_LOG_DIR, default build/setup-logs).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${TS_BUILD_DIR:-build}"
JOBS="${TS_JOBS:-$(nproc)}"
LOGS="${TS_LOG_DIR:-$ROOT/$BUILD_DIR/setup-logs}"
mkdir -p "$LOGS"

# Debian packages the project needs to build, test and fetch its inputs. The photo packages
# (darknet, python3-skimage, opencv-doc) are deliberately not installed: photos.sh downloads
# their .deb files alone and unpacks only the listed photos, which avoids several hundred
# dependencies. python3-torch is not needed either (only to regenerate committed test models).
# python3-numpy runs the independent int8 reference (scripts/int8_reference.py, docs/int8.md).
# clang with its libFuzzer and sanitizer runtimes (libclang-rt-14-dev) and ccache build the fuzz
# targets (scripts/fuzz.sh, run for a few seconds by the test suite).
# dependencies. python3-torch is not needed either (only to regenerate committed test models and
# to train the Fashion-MNIST model: scripts/fashion_mnist.sh installs it). dataset-fashion-mnist
# (30 MB) holds the labelled images of tests/fashion_mnist_test.cpp and `eval --dataset`.
# iproute2 (ip, tc) builds the network namespaces and impaired links of scripts/netem_run.sh.
# libmbedtls-dev: Mbed TLS's SHA-256 behind src/core/sha256.h (the firmware builds the same
# library from Debian's source package, scripts/build_firmware.sh).
APT_PACKAGES=(
  build-essential cmake
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libstb-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  gnuplot-nox ca-certificates openssl
  python3-numpy
  clang libclang-rt-14-dev ccache
  zlib1g-dev dataset-fashion-mnist
  iproute2
  libmbedtls-dev
)

STEP=0
NSTEPS=5
T_START=$SECONDS
step_begin() { STEP=$((STEP + 1)); T_STEP=$SECONDS; printf '[setup %d/%d] %s ... ' "$STEP" "$NSTEPS" "$1"; }
step_end() { echo "${1:-done} ($((SECONDS - T_STEP))s)"; }
# run_logged <log name> <command...>: output to the log; on failure show its tail and stop.
run_logged() {
  local log="$LOGS/$1.log"; shift
  if ! "$@" >"$log" 2>&1; then
    echo "FAILED ($((SECONDS - T_STEP))s)"
    echo "--- last lines of $log:" >&2
    tail -n 40 "$log" >&2
    echo "setup: step $STEP failed: $*" >&2
    exit 1
  fi
}

echo "setup: tinysplit in $ROOT (logs in $LOGS)"

# ---- 1. Debian packages
step_begin "Debian packages"
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
# Node.js and npm: keep whatever node the machine has (it may come from another source, whose
# nodejs package already carries npm); install Debian's only when node or npm is absent.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if [[ ${#missing[@]} -eq 0 ]]; then
  step_end "all present"
else
  [[ $EUID -eq 0 ]] || { echo "FAILED"; echo "setup: run as root to install: ${missing[*]}" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  run_logged apt-update apt-get update -q
  run_logged apt-install apt-get install -y -q --no-install-recommends "${missing[@]}"
  step_end "installed ${#missing[@]}: ${missing[*]}"
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[[ "$node_major" -ge 18 ]] || { echo "setup: node $(node --version) is too old; need 18 or newer" >&2; exit 1; }

# ---- 2. Default model
step_begin "model (nsfwjs@4.4.0 MobileNetV2 -> models/mobilenetv2)"
run_logged model bash scripts/fetch_model.sh
step_end "$(tail -n 1 "$LOGS/model.log" | sed 's/^fetch_model: //')"

# ---- 3. Photos
step_begin "photos (data/photos.txt -> data/calib, data/eval)"
if ! bash scripts/photos.sh >"$LOGS/photos.log" 2>&1; then
  # A fresh machine may have no package lists yet: fetch them once and retry.
  if [[ $EUID -eq 0 ]] && grep -q "apt-get download .* failed" "$LOGS/photos.log"; then
    run_logged apt-update apt-get update -q
    run_logged photos bash scripts/photos.sh
  else
    echo "FAILED"; tail -n 20 "$LOGS/photos.log" >&2; exit 1
  fi
fi
step_end "$(tail -n 1 "$LOGS/photos.log" | sed 's/^photos: //')"

# ---- 4. TF.js reference runner
step_begin "TF.js reference deps (scripts/ref)"
stamp="scripts/ref/node_modules/.package-lock.json"
if [[ -f "$stamp" && "$stamp" -nt scripts/ref/package-lock.json && "$stamp" -nt scripts/ref/package.json ]] \
   && (cd scripts/ref && npm ls --depth=0 >/dev/null 2>&1); then
  step_end "up to date"
else
  run_logged npm bash -c 'cd scripts/ref && npm ci --no-audit --no-fund --loglevel=error'
  step_end "installed $(node -p 'require("./scripts/ref/node_modules/@tensorflow/tfjs/package.json").version' 2>/dev/null | sed 's/^/@tensorflow\/tfjs /')"
fi

# ---- 5. C++ build
read -r -a targets <<<"${TS_BUILD_TARGETS:-}"
step_begin "C++ configure + build ($BUILD_DIR, -j$JOBS${targets[*]:+, targets: ${targets[*]}})"
if [[ "${TS_SKIP_BUILD:-0}" == 1 ]]; then
  step_end "skipped (TS_SKIP_BUILD=1)"
else
  run_logged cmake-configure cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
  run_logged cmake-build cmake --build "$BUILD_DIR" -j "$JOBS" ${targets[@]:+--target "${targets[@]}"}
  step_end
fi

echo "setup: done in $((SECONDS - T_START))s"
