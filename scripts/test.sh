#!/usr/bin/env bash
# Sets up (Debian packages only), builds and runs every Flotilla test.
#   --quick   leave out the tests labelled `long` and the fuzzing of
#             scripts/hardening_tests.sh (for the edit-build loop)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake --preset default
cmake --build --preset default
if [ "${1:-}" = "--quick" ]; then
  ctest --preset quick -j2
else
  ctest --preset default -j2
  bash scripts/hardening_tests.sh
fi
