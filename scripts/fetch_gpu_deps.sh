#!/usr/bin/env bash
# fetch_gpu_deps.sh: fetch, on this (Debian) machine, the Debian packages that
# the GPU machine lacks, unpacked into the folder that scripts/gpu_check.sh
# reads there (GPU_DIR, default ./.gpu, git-ignored). Nothing is installed
# here: `apt-get download` and `dpkg-deb -x` only. See docs/gpu.md.
#
# Usage: bash scripts/fetch_gpu_deps.sh [DIR]     (default: .gpu under the repository root)
# Lays out, as gpu_check.sh expects:
#   DIR/deps/usr        GTest/GMock, yaml-cpp (headers, CMake files, the .so it
#                       loads at run time), CLI11, nlohmann_json
#   DIR/deps-zlib/usr   zlib's headers and static library (for a machine without zlib.h)
#   DIR/gloo-include    gloo's headers (ProcessGroupGloo.hpp includes them;
#                       pip's torch wheel lacks them)
#   DIR/data            Fashion-MNIST, the tests' and the GPU run's data set
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${1:-$HERE/../.gpu}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

DEPS_PACKAGES=(libgtest-dev libgmock-dev libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev nlohmann-json3-dev)
ZLIB_PACKAGES=(zlib1g-dev)
GLOO_PACKAGES=(libgloo-dev)
DATA_PACKAGES=(dataset-fashion-mnist)

for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "fetch_gpu_deps.sh: needs $tool (a Debian machine)" >&2; exit 1; }
done

DEBS=$(mktemp -d)
trap 'rm -rf "$DEBS"' EXIT

# Downloads the packages (amd64, the GPU machine's architecture) and unpacks
# each into $1.
fetch_into() {
  local target=$1; shift
  (cd "$DEBS" && apt-get download -q "${@/%/:amd64}" >/dev/null 2>"$DEBS/apt.err") || {
    # Architecture-independent packages have no :amd64 name.
    (cd "$DEBS" && apt-get download -q "$@" >/dev/null 2>"$DEBS/apt.err") || {
      echo "fetch_gpu_deps.sh: apt-get download $* failed:" >&2
      cat "$DEBS/apt.err" >&2
      exit 1
    }
  }
  local p deb
  for p in "$@"; do
    deb=$(ls "$DEBS"/"${p}"_*.deb 2>/dev/null | head -1)
    [[ -n $deb ]] || { echo "fetch_gpu_deps.sh: $p: no .deb downloaded" >&2; exit 1; }
    dpkg-deb -x "$deb" "$target"
    echo "  $(basename "$deb") -> ${target#"$DIR"/}"
  done
  rm -f "$DEBS"/*.deb
}

echo "fetch_gpu_deps.sh: into $DIR"
rm -rf "$DIR/deps" "$DIR/deps-zlib" "$DIR/gloo-include" "$DIR/data"
fetch_into "$DIR/deps" "${DEPS_PACKAGES[@]}"
fetch_into "$DIR/deps-zlib" "${ZLIB_PACKAGES[@]}"
mkdir -p "$DEBS/gloo"
fetch_into "$DEBS/gloo" "${GLOO_PACKAGES[@]}"
mv "$DEBS/gloo/usr/include" "$DIR/gloo-include"
mkdir -p "$DEBS/data"
fetch_into "$DEBS/data" "${DATA_PACKAGES[@]}"
mv "$DEBS/data/usr/share/datasets/fashion-mnist" "$DIR/data"

# What gpu_check.sh's configure stage looks for, checked here.
missing=0
for f in deps/usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake \
         deps/usr/lib/x86_64-linux-gnu/cmake/yaml-cpp/yaml-cpp-config.cmake \
         deps/usr/share/cmake/CLI11/CLI11Config.cmake \
         deps/usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake \
         deps-zlib/usr/include/zlib.h deps-zlib/usr/lib/x86_64-linux-gnu/libz.a \
         gloo-include/gloo/algorithm.h; do
  [[ -e $DIR/$f ]] || { echo "fetch_gpu_deps.sh: missing $DIR/$f" >&2; missing=1; }
done
ls "$DIR"/deps/usr/lib/x86_64-linux-gnu/libyaml-cpp.so.* >/dev/null 2>&1 ||
  { echo "fetch_gpu_deps.sh: missing yaml-cpp's shared library" >&2; missing=1; }
ls "$DIR"/data/*ubyte* >/dev/null 2>&1 ||
  { echo "fetch_gpu_deps.sh: missing the Fashion-MNIST files in $DIR/data" >&2; missing=1; }
(( missing == 0 )) || exit 1
echo "fetch_gpu_deps.sh: complete ($(du -sh "$DIR" | cut -f1)): deps/ deps-zlib/ gloo-include/ data/"
