#!/usr/bin/env bash
# The window thread's round trip, measured from outside (window_latency.cpp),
# on a quiet machine at QT_SCALE_FACTOR=1 (Xvfb 1600x1000) and 2 (3200x2000):
#   tests/bench/window_latency.sh [SECONDS] [TABS] [SHOTS_DIR]
# TABS defaults to dashboard,compare,sweeps (nodes may be named too); SHOTS_DIR (default
# build/screenshots/latency) receives each tab's picture at each scale.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-45}"
tabs="${2:-dashboard,compare,sweeps}"
shots="$(realpath -m "${3:-build/screenshots/latency}")"
mkdir -p "$shots"
for scale in 1 2; do
  QT_QPA_PLATFORM=xcb QT_SCALE_FACTOR=$scale \
    xvfb-run -a -s "-screen 0 $((1600 * scale))x$((1000 * scale))x24" \
    ./build/bin/window_latency --seconds "$seconds" --tabs "$tabs" --shots "$shots"
done
