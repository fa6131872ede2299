#!/bin/sh
# build_engine_on_node.sh: builds flotilla-train on a node, against the
# node's own LibTorch, from the engine source bundle the controller sent
# (engine-source.tar.gz, unpacked into ENGINE_DIR/src: the engine's and the
# protocol's sources, this script, and under deps/ the headers and libraries
# the engine needs from the desktop's Debian packages).
#
# Usage: sh build_engine_on_node.sh TORCH ENGINE_DIR
#   TORCH       the LibTorch's prefix (a folder with TorchConfig.cmake under
#               it); empty: python3's torch
#   ENGINE_DIR  where the bundle was unpacked (ENGINE_DIR/src); each LibTorch
#               gets its own ENGINE_DIR/torch-VERSION-KEY
#
# Progress goes to stdout as it comes; a problem to stderr, one line naming
# what the node lacks, and exit 1. The last stdout line is
# "FLOTILLA_ENGINE {json}": what was built (or found built before).
# POSIX sh: a node need not have bash.
set -u

torch=$1
dir=$(cd "$2" && pwd) || { echo "engine build: no folder $2" >&2; exit 1; }
src=$dir/src
deps=$src/deps/usr

fail() {
  echo "engine build: $*" >&2
  exit 1
}
say() { echo "engine build: $*"; }

# ---- the tools a build needs, each named when missing
for tool in cmake c++ tar; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "this node has no $tool on the PATH (the engine is built with cmake and a C++17 compiler; on Debian: apt-get install cmake g++)"
done
if command -v ninja >/dev/null 2>&1; then
  generator=Ninja
elif command -v make >/dev/null 2>&1; then
  generator="Unix Makefiles"
else
  fail "this node has neither ninja nor make (on Debian: apt-get install ninja-build)"
fi
cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9][0-9.]*\).*/\1/p')
cmake_major=$(echo "$cmake_version" | cut -d. -f1)
cmake_minor=$(echo "$cmake_version" | cut -d. -f2)
if [ "${cmake_major:-0}" -lt 3 ] || { [ "$cmake_major" -eq 3 ] && [ "${cmake_minor:-0}" -lt 25 ]; }; then
  fail "this node's cmake is $cmake_version; the engine needs 3.25 or newer"
fi

# ---- the LibTorch to build against
if [ -n "$torch" ]; then
  [ -d "$torch" ] || fail "no LibTorch at $torch: no such folder (--torch names the LibTorch's prefix)"
  config=$(find "$torch" -name TorchConfig.cmake 2>/dev/null | head -1)
  [ -n "$config" ] ||
    fail "no LibTorch at $torch: no TorchConfig.cmake under it (--torch names the LibTorch's prefix: the unpacked libtorch folder, or what python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' prints)"
  torch_dir=$(dirname "$config")
else
  command -v python3 >/dev/null 2>&1 ||
    fail "no LibTorch: the node was given no --torch PREFIX and has no python3 with torch"
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null) ||
    fail "no LibTorch: the node was given no --torch PREFIX and python3 there cannot import torch"
  torch_dir=$prefix/Torch
  [ -e "$torch_dir/TorchConfig.cmake" ] || fail "python3's torch has no $torch_dir/TorchConfig.cmake"
fi
torch_dir=$(cd "$torch_dir" && pwd)
version=$(sed -n 's/^ *set(PACKAGE_VERSION "\([^"]*\)").*/\1/p' "$torch_dir/TorchConfigVersion.cmake" 2>/dev/null | head -1)
[ -n "$version" ] || version=unknown
# Where its libraries are: Debian's cmake files sit in lib/<arch>/cmake/Torch,
# a libtorch folder's and a wheel's in share/cmake/Torch beside lib/.
cuda=false
for lib in "$torch_dir/../.." "$torch_dir/../../../lib"; do
  [ -e "$lib/libtorch_cuda.so" ] && cuda=true
done
key=$(printf '%s' "$torch_dir" | cksum | cut -d' ' -f1)
out=$dir/torch-$version-$key
engine_json() {
  printf '{"path":"%s","torch_version":"%s","torch_dir":"%s","cuda":%s}' \
    "$out/flotilla-train" "$version" "$torch_dir" "$cuda"
}
# One build at a time into a folder: two probes of one node (a window and a
# CLI, or two desktops) would otherwise write the same files. The second
# waits, then finds the first one's engine. The kernel drops the lock with
# the process, so a build killed midway leaves none behind.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.build-$key.lock"
  if ! flock -n 9; then
    say "another build against LibTorch $version is running on this node; waiting for it"
    flock 9 || fail "cannot wait for the other build's lock ($dir/.build-$key.lock)"
  fi
fi
if [ -e "$out/.complete" ] && [ -x "$out/flotilla-train" ]; then
  say "already built against LibTorch $version ($torch_dir) in $out"
  echo "FLOTILLA_ENGINE $(engine_json)"
  exit 0
fi
say "building against LibTorch $version ($torch_dir, $([ "$cuda" = true ] && echo CUDA || echo CPU only)) in $out"

# ---- what the carried dependencies stand in for
extra=""
if [ ! -e /usr/include/zlib.h ]; then
  extra="-DZLIB_USE_STATIC_LIBS=ON -DZLIB_INCLUDE_DIR=$deps/include -DZLIB_LIBRARY=$deps/lib/x86_64-linux-gnu/libz.a"
fi
# ProcessGroupGloo.hpp includes gloo's headers, which a wheel lacks;
# ProcessGroupNCCL.hpp includes <nccl.h>, which the wheel's nvidia-nccl has.
torch_include=$(cd "$torch_dir/../../.." && pwd)/include
[ -e "$torch_include/gloo/algorithm.h" ] || [ -e /usr/include/gloo/algorithm.h ] ||
  export CPATH="${CPATH:+$CPATH:}$src/deps/gloo-include"
if [ "$cuda" = true ] && [ ! -e /usr/include/nccl.h ] && command -v python3 >/dev/null 2>&1; then
  for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    nccl=$(find "$sp/nvidia" -name nccl.h 2>/dev/null | head -1)
    [ -n "$nccl" ] && export CPATH="$(dirname "$nccl")${CPATH:+:$CPATH}" && break
  done
fi

build=$out.build
rm -rf "$build" "$out"
jobs=$(nproc 2>/dev/null || echo 2)
say "configure"
# RPATH, not RUNPATH: the agent runs with the bundle's libraries on
# LD_LIBRARY_PATH, and this engine must load its own LibTorch first.
# shellcheck disable=SC2086
cmake -S "$src" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DFLOTILLA_BUILD_GUI=OFF -DFLOTILLA_BUILD_TESTS=OFF \
  -DTorch_DIR="$torch_dir" -DCMAKE_PREFIX_PATH="$deps" \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags $extra >"$dir/configure.log" 2>&1 || {
  tail -20 "$dir/configure.log" >&2
  fail "cmake could not configure the engine against LibTorch $version (the log: $dir/configure.log)"
}
say "compile ($jobs jobs)"
cmake --build "$build" --target flotilla-train -j "$jobs" 2>&1 | tee "$dir/build.log" | grep '^\[' 
[ -x "$build/bin/flotilla-train" ] || {
  grep -E 'error|Error' "$dir/build.log" | head -20 >&2
  fail "the engine did not compile against LibTorch $version (the log: $dir/build.log)"
}
mkdir -p "$out"
cp "$build/bin/flotilla-train" "$out/"
# yaml-cpp comes from the carried packages; beside the engine, found through $ORIGIN.
cp -P "$deps"/lib/x86_64-linux-gnu/libyaml-cpp.so.* "$out/" 2>/dev/null
"$out/flotilla-train" --help >/dev/null 2>&1 ||
  fail "the engine was built but does not start: $("$out/flotilla-train" --help 2>&1 | head -3)"
rm -rf "$build"
: >"$out/.complete"
say "built $out/flotilla-train"
echo "FLOTILLA_ENGINE $(engine_json)"
