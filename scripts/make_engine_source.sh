#!/usr/bin/env bash
# make_engine_source.sh: the engine source bundle that a node builds its own
# flotilla-train from (scripts/build_engine_on_node.sh, docs/nodes.md): the
# sources of the engine and of the protocol it links, the build script, and
# under deps/ the headers and libraries of the desktop's Debian packages that
# a GPU node usually lacks (yaml-cpp, CLI11, nlohmann-json, zlib, gloo's
# headers). The archive is the same bytes for the same files (sorted, no
# times or owners), so its hash names what a node built.
#
# Usage: bash scripts/make_engine_source.sh SOURCE_DIR OUT.tar.gz
set -euo pipefail

SRC=$(cd "$1" && pwd)
OUT=$2
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT

mkdir -p "$STAGE/src/scripts" "$STAGE/src/resources"
cp "$SRC/CMakeLists.txt" "$STAGE/src/"
cp -r "$SRC/agent" "$SRC/engine" "$STAGE/src/"
cp "$SRC/resources/CMakeLists.txt" "$STAGE/src/resources/"
cp "$SRC/scripts/build_engine_on_node.sh" "$STAGE/src/scripts/"

# The packages' own files, as dpkg lists them (documentation left out).
copy_package() {
  local package=$1 into=$2 file
  dpkg -L "$package" >/dev/null 2>&1 || {
    echo "make_engine_source.sh: package $package is not installed (scripts/setup.sh installs it)" >&2
    exit 1
  }
  while IFS= read -r file; do
    [[ -f $file || -L $file ]] || continue
    [[ $file == /usr/share/doc/* || $file == /usr/share/lintian/* ]] && continue
    mkdir -p "$into$(dirname "$file")"
    cp -P "$file" "$into$file"
  done < <(dpkg -L "$package")
}
yaml_runtime=$(dpkg -S "$(readlink -f /usr/lib/x86_64-linux-gnu/libyaml-cpp.so)" | cut -d: -f1)
for package in libyaml-cpp-dev "$yaml_runtime" libcli11-dev nlohmann-json3-dev zlib1g-dev; do
  copy_package "$package" "$STAGE/src/deps"
done
copy_package libgloo-dev "$STAGE/gloo"
mv "$STAGE/gloo/usr/include" "$STAGE/src/deps/gloo-include"
# Only gloo's headers: its libraries are inside every LibTorch.
mkdir -p "$(dirname "$OUT")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$STAGE/src" -cf - . |
  gzip -n -9 >"$OUT.part"
mv "$OUT.part" "$OUT"
