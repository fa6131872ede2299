#!/usr/bin/env bash
# Runs the GUI test under Xvfb on the real X platform and saves the window,
# mid-run with a live chart, as a person sees it: tests/gui/screenshot.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/../.."
out="$(realpath -m "${1:-build/flotilla-window.png}")"
cmake --build --preset default --target gui_tests
QT_QPA_PLATFORM=xcb FLOTILLA_SCREENSHOT="$out" \
  xvfb-run -a -s "-screen 0 1400x950x24" ./build/bin/gui_tests --gtest_filter='MainWindow.*'
echo "screenshot: $out"
