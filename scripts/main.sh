#!/usr/bin/env bash
# Sets up (Debian packages only), builds, and runs Flotilla's main job on its
# embedded defaults: the SQLite database in the user's data directory and the
# `local` node. With a display it opens the window with the presets imported
# (select one, press Run); without one it says so and runs the Fashion-MNIST
# preset from the command line instead, printing the run's summary.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default --target flotilla flotilla-gui flotilla-agent flotilla-train

./build/bin/flotilla experiments import resources/presets/*.yaml
if [[ -n "${DISPLAY:-}" || -n "${WAYLAND_DISPLAY:-}" ]]; then
  exec ./build/bin/flotilla-gui "$@"
fi
echo "No display (DISPLAY and WAYLAND_DISPLAY are unset): running the command-line job instead."
exec ./build/bin/flotilla run resources/presets/fashion_mnist_small_cnn.yaml "$@"
