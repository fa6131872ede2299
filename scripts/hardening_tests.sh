#!/usr/bin/env bash
# The hardening steps of scripts/test.sh (docs/hardening.md, "What CI runs"),
# run after the default tests when clang++ is installed: one clang build with
# ASan+UBSan (the `sanitize` preset) of protocol, agent and controller, their
# unit tests run on it, and every fuzz target of tests/fuzz, which link the
# same instrumented objects, fuzzed for FLOTILLA_FUZZ_SECONDS (default 30)
# each, one target per core at a time. Prints each step's time. Fails when a
# test fails, a sanitizer reports, or a target crashed (its input is in
# build-sanitize/crashes/TARGET).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang++ >/dev/null; then
  echo "hardening: no clang++, the sanitizer tests and fuzzing do not run (scripts/setup.sh installs clang)"
  exit 0
fi
started=$SECONDS
cmake --preset sanitize
cmake --build --preset sanitize
built=$SECONDS
echo "hardening: sanitizer build took $((built - started)) s"
ctest --preset sanitize -j2
tested=$SECONDS
echo "hardening: unit tests under ASan+UBSan took $((tested - built)) s"
tests/fuzz/run.sh "${FLOTILLA_FUZZ_SECONDS:-30}"
echo "hardening: fuzzing took $((SECONDS - tested)) s (all hardening steps $((SECONDS - started)) s)"
