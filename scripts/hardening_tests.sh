#!/usr/bin/env bash
# The hardening steps of scripts/test.sh (docs/hardening.md), run after the
# default tests: every fuzz target of tests/fuzz built with the `fuzz` preset
# (clang, ASan+UBSan) and fuzzed for FLOTILLA_FUZZ_SECONDS (default 10) each,
# when clang++ is installed. Prints each step's time. Fails when a target
# crashed (its input is in build-fuzz/crashes/TARGET).
# 10 s, not 30: CI took 2176 s before this step and building the targets
# from nothing takes about 394 s on 2 cores, which leaves about 70 s of the
# 44 minutes we keep (docs/hardening.md, "What CI runs").
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang++ >/dev/null; then
  echo "hardening: no clang++, the fuzz targets are not fuzzed (scripts/setup.sh installs clang)"
  exit 0
fi
started=$SECONDS
cmake --preset fuzz
cmake --build --preset fuzz --target protocol_decode_fuzz rank_record_fuzz config_fuzz sweep_fuzz records_fuzz
built=$SECONDS
echo "hardening: fuzz build took $((built - started)) s"
tests/fuzz/run.sh "${FLOTILLA_FUZZ_SECONDS:-10}"
echo "hardening: fuzzing took $((SECONDS - built)) s (build and fuzzing $((SECONDS - started)) s)"
