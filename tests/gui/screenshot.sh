#!/usr/bin/env bash
# Runs window tests under Xvfb on the real X platform and keeps what a person
# sees, each test's windows as DIR/NAME.png (a live DDP run, a live pipeline,
# the Compare tab, the nodes view, ...):
#   tests/gui/screenshot.sh [DIR] [GTEST_FILTER]
# DIR defaults to build/screenshots, the filter to MainWindow.* (root runs
# the cluster ones too, e.g. 'NodesView.*').
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="$(realpath -m "${1:-build/screenshots}")"
filter="${2:-MainWindow.*}"
mkdir -p "$dir"
cmake --build --preset default --target gui_tests
QT_QPA_PLATFORM=xcb FLOTILLA_SCREENSHOT_DIR="$dir" \
  xvfb-run -a -s "-screen 0 1600x1000x24" ./build/bin/gui_tests --gtest_filter="$filter"
ls -1 "$dir"/*.png
