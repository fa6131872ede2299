#!/usr/bin/env bash
# Installs, only when missing, every Debian package Flotilla needs to build,
# test and run. Idempotent: a second run installs nothing and says so.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git clang-format
  clang libclang-rt-dev
  libtorch-dev libgloo-dev python3-torch
  # OpenBLAS becomes Debian's libblas.so.3 (its alternative outranks the
  # reference BLAS LibTorch pulls in): the Transformers train several times
  # faster on the CPU. limits.memory_mb is watched by the agent, not set as
  # RLIMIT_DATA, under which OpenBLAS spun on its failed buffer mmap.
  libopenblas0-pthread
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libqt6sql6-sqlite libsqlite3-dev libgl-dev libglx-dev libopengl-dev
  sqlite3 xz-utils
  libssh-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev
  # Also carried in the engine source bundle that nodes build their engine from.
  zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
  openssh-server openssh-client iproute2 nftables procps locales
  # The SLURM test cluster (tests/cluster/cluster.sh --slurm): a controller,
  # a node daemon per host and munge for their credentials.
  slurmctld slurmd slurm-client munge
  xvfb x11-apps imagemagick
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# A comma-decimal locale, so that the tests can show numbers read and print
# the same under it (Qt programs take the user's locale).
if ! locale -a 2>/dev/null | grep -qix 'de_DE\.utf-\?8'; then
  echo "setup: generating the de_DE.UTF-8 locale for the locale tests"
  $sudo localedef -i de_DE -c -f UTF-8 de_DE.UTF-8
fi
