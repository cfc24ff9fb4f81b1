#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: set up (idempotent:
# packages, model, photos, build), then every test with CTest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
BUILD_DIR="${TS_BUILD_DIR:-build}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${TS_TEST_JOBS:-2}" "$@"
