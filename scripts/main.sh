#!/usr/bin/env bash
# Sets up (Debian packages only), builds, and runs Flotilla's main job: train
# the Fashion-MNIST preset on this machine and print the run's summary.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default --target flotilla-train
mkdir -p runs
records="runs/fashion-mnist-$(date +%Y%m%d-%H%M%S).jsonl"
echo "Training resources/presets/fashion_mnist_small_cnn.yaml; records go to $records"
./build/bin/flotilla-train --config resources/presets/fashion_mnist_small_cnn.yaml --records "$records"
