#!/usr/bin/env bash
# Installs, only when missing, every Debian package Flotilla needs to build,
# test and run. Idempotent: a second run installs nothing and says so.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git clang-format
  libtorch-dev libgloo-dev python3-torch
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libqt6sql6-sqlite libgl-dev libglx-dev libopengl-dev
  libssh-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
  openssh-server openssh-client iproute2 procps
  xvfb x11-apps imagemagick
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
