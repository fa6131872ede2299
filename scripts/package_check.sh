#!/usr/bin/env bash
# The Debian package on a clean Debian 12: `cpack -G DEB` of a build tree,
# installed with apt into a fresh debootstrap tree (a folder of the build
# tree, copied anew for every check), then used there as a user would:
# `flotilla --help`, `flotilla-train --plan` of an installed preset, and a
# short CPU training run through `flotilla run` (CLI, agent, flotilla-train).
#
#   scripts/package_check.sh [BUILD_DIR]        (default: build, already built)
#
# Needs root (debootstrap, chroot, a /proc mount), debootstrap
# (`apt-get install debootstrap`) and a Debian mirror: FLOTILLA_DEBIAN_MIRROR,
# default http://deb.debian.org/debian. The debootstrap tree is made once
# (BUILD_DIR/package-check/bookworm) and never installed into.
set -euo pipefail

build=$(realpath "${1:-build}")
mirror=${FLOTILLA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$build/package-check
base=$work/bookworm
root=$work/root

fail() {
  echo "package_check: $*" >&2
  exit 1
}
[[ $EUID -eq 0 ]] || fail "needs root (debootstrap, chroot, mounting /proc)"
for tool in debootstrap cpack chroot; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (apt-get install debootstrap cmake)"
done
[[ -x $build/bin/flotilla && -x $build/bin/flotilla-train ]] ||
  fail "$build holds no built flotilla and flotilla-train: build every target first"

echo "== cpack -G DEB in $build"
(cd "$build" && cpack -G DEB >/dev/null) || fail "cpack -G DEB failed in $build"
deb=$(ls -t "$build"/flotilla_*.deb 2>/dev/null | head -n1)
[[ -n $deb ]] || fail "cpack made no flotilla_*.deb in $build"
echo "package: $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --field "$deb" Package Version Depends

if [[ ! -e $base/.complete ]]; then
  echo "== debootstrap bookworm from $mirror into $base"
  rm -rf --one-file-system "$base"
  debootstrap --variant=minbase bookworm "$base" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    fail "debootstrap from $mirror failed; its last lines: $(tail -n 5 "$work/debootstrap.log")"
  touch "$base/.complete"
fi

unmount() {
  if mountpoint -q "$root/proc"; then umount "$root/proc"; fi
}
trap unmount EXIT
unmount
# --one-file-system: never reaches into anything still mounted below it.
rm -rf --one-file-system "$root"
cp -a "$base" "$root"
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/tmp/"
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}

echo "== apt-get install ./$(basename "$deb") on a clean Debian 12"
in_root apt-get update -q >"$work/apt.log" 2>&1 || fail "apt-get update failed: $(tail -n 5 "$work/apt.log")"
in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")" >>"$work/apt.log" 2>&1 ||
  fail "the package does not install: $(tail -n 15 "$work/apt.log")"
in_root sh -c 'grep -m1 PRETTY_NAME /etc/os-release'
in_root dpkg -L flotilla | grep -E '^/usr/(bin|share/(applications|icons|flotilla/presets))/.' | sort

echo "== flotilla --help"
in_root flotilla --help | head -n 5

echo "== flotilla-train --plan /usr/share/flotilla/presets/synthetic_vgg13.yaml"
plan=$(in_root flotilla-train --plan /usr/share/flotilla/presets/synthetic_vgg13.yaml)
grep -q '"blocks"' <<<"$plan" || fail "flotilla-train --plan printed no plan: $plan"
echo "${plan:0:300}..."

echo "== a short CPU training run: flotilla run (CLI -> agent -> flotilla-train)"
cat >"$root/root/quick.yaml" <<'YAML'
name: package-check
model: small_cnn
dataset: synthetic
synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 640, test_samples: 64}
strategy: ddp
ranks_per_node: 2
batch_size: 32
epochs: 1
max_steps: 10
threads: 1
YAML
in_root flotilla --db /root/flotilla.db run /root/quick.yaml ||
  fail "the training run did not finish (exit status $?)"
in_root flotilla --db /root/flotilla.db runs
echo "package_check: the package installs and runs on a clean Debian 12"
