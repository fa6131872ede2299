#!/usr/bin/env bash
# The Debian package on a clean Debian 12: `cpack -G DEB` of a build tree,
# installed with apt into a fresh copy of a debootstrapped bookworm, then used
# there as a user would: `flotilla --help`, `flotilla-train --plan` of an
# installed preset, a 2-rank 10-step CPU training run through `flotilla run`
# (CLI -> agent -> flotilla-train), and the window started offscreen on that
# run (its screenshot is kept). How to run it and what it shows:
# docs/packaging.md.
#
#   scripts/package_check.sh [BUILD_DIR]        (default: build, already built)
#
# Needs root (debootstrap, chroot, mounts), debootstrap and a Debian mirror:
# FLOTILLA_DEBIAN_MIRROR, default http://deb.debian.org/debian. The
# debootstrap tree is made once in FLOTILLA_PACKAGE_CHECK_CACHE (default
# /var/cache/flotilla-package-check/bookworm, outside any build tree) and
# never installed into: every check copies it anew and removes the copy.
# Logs and the window's screenshot go to BUILD_DIR/package-check/.
# FLOTILLA_CPU_LOCK: a lock file held (flock) around the training run only,
# on a machine shared with other builds.
set -euo pipefail

build=$(realpath "${1:-build}")
mirror=${FLOTILLA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${FLOTILLA_PACKAGE_CHECK_CACHE:-/var/cache/flotilla-package-check}
base=$cache/bookworm
out=$build/package-check

heavy() {
  if [[ -n ${FLOTILLA_CPU_LOCK:-} ]]; then flock -o "$FLOTILLA_CPU_LOCK" "$@"; else "$@"; fi
}
fail() {
  echo "package_check: $*" >&2
  exit 1
}
[[ $EUID -eq 0 ]] || fail "needs root (debootstrap, chroot, mounting /proc)"
for tool in debootstrap cpack chroot dpkg-deb; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (apt-get install debootstrap cmake)"
done
for program in flotilla flotilla-gui flotilla-agent flotilla-train; do
  [[ -x $build/bin/$program ]] ||
    fail "$build/bin/$program is not built: cmake --build $build --target flotilla flotilla-gui flotilla-agent flotilla-train"
done
mkdir -p "$out" "$cache"

# The package carries no LibTorch of its own: it depends on Debian's (the
# libtorch1.13 package dpkg-shlibdeps names). A LibTorch from elsewhere (pip's
# CUDA one) has no Debian package to depend on, so such a build makes no .deb.
torch_library=$(ldd "$build/bin/flotilla-train" | awk '/libtorch_cpu/ && !found {print $3; found = 1}')
[[ -n $torch_library ]] || fail "$build/bin/flotilla-train links no libtorch_cpu (ldd)"
dpkg -S "$(realpath "$torch_library")" >/dev/null 2>&1 ||
  fail "$build/bin/flotilla-train links $torch_library, which no Debian package holds: a .deb can depend only on Debian's LibTorch (libtorch-dev); configure with it"

echo "== cpack -G DEB in $build"
rm -f "$build"/flotilla_*.deb
(cd "$build" && cpack -G DEB) >"$out/cpack.log" 2>&1 ||
  fail "cpack -G DEB failed in $build: $(tail -n 15 "$out/cpack.log")"
deb=$(ls "$build"/flotilla_*.deb 2>/dev/null | head -n1)
[[ -n $deb ]] || fail "cpack made no flotilla_*.deb in $build"
echo "package: $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --field "$deb" Package Version Architecture Installed-Size Depends
dpkg-deb --contents "$deb" | awk '$6 !~ /\/$/ {print $6}'

if [[ ! -e $base/.complete ]]; then
  echo "== debootstrap bookworm from $mirror into $base (once)"
  rm -rf --one-file-system "$base"
  debootstrap --variant=minbase bookworm "$base" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    fail "debootstrap from $mirror failed; its last lines: $(tail -n 5 "$cache/debootstrap.log")"
  touch "$base/.complete"
fi

root=$(mktemp -d "$cache/root.XXXXXX")
mounts=(proc sys dev/shm)
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    if mountpoint -q "$root/${mounts[i]}"; then umount "$root/${mounts[i]}"; fi
  done
  # --one-file-system: never reaches into anything still mounted below it.
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
cp -a "$base/." "$root/"
# What a booted Debian has: /proc, /sys (CPU topology for LibTorch's thread
# pools) and a /dev/shm.
mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys"
mkdir -p "$root/dev/shm"
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/tmp/"
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}

echo "== apt-get install ./$(basename "$deb") on a clean Debian 12"
in_root sh -c 'grep -m1 PRETTY_NAME /etc/os-release'
in_root apt-get update -q >"$out/apt.log" 2>&1 || fail "apt-get update failed: $(tail -n 5 "$out/apt.log")"
in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")" >>"$out/apt.log" 2>&1 ||
  fail "the package does not install: $(tail -n 15 "$out/apt.log")"
grep -E '^[0-9]+ upgraded, [0-9]+ newly installed' "$out/apt.log"
in_root dpkg-query -W -f='${Package} ${Version} ${Status}\n' flotilla
in_root dpkg -L flotilla | grep -E '^/usr/(bin|share/(applications|icons|flotilla/presets))/.' | sort

echo "== flotilla --help"
help=$(in_root flotilla --help) || fail "flotilla --help failed: $help"
head -n 8 <<<"$help"

echo "== flotilla-train --plan --config /usr/share/flotilla/presets/synthetic_vgg13.yaml"
plan=$(in_root flotilla-train --plan --config /usr/share/flotilla/presets/synthetic_vgg13.yaml) ||
  fail "flotilla-train --plan failed: $plan"
grep -q '"blocks"' <<<"$plan" || fail "flotilla-train --plan printed no plan: $plan"
echo "${plan:0:300}..."

echo "== a 2-rank 10-step CPU run: flotilla run (CLI -> agent -> flotilla-train)"
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
status=0
heavy chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin LANG=C.UTF-8 \
  flotilla --db /root/flotilla.db run /root/quick.yaml || status=$?
[[ $status -eq 0 ]] || fail "the training run did not finish (exit status $status)"
runs=$(in_root flotilla --db /root/flotilla.db runs)
echo "$runs"
run=$(awk 'NR > 1 && $0 ~ /package-check/ {print $1; exit}' <<<"$runs")
[[ -n $run ]] || fail "flotilla runs lists no run of package-check"
in_root flotilla --db /root/flotilla.db show "$run"

echo "== flotilla-gui offscreen: the window on run $run, saved to a picture"
in_root QT_QPA_PLATFORM=offscreen flotilla-gui --db /root/flotilla.db --run "$run" \
  --screenshot /root/window.png || fail "flotilla-gui did not start offscreen"
cp "$root/root/window.png" "$out/window.png"
echo "the window's screenshot: $out/window.png ($(du -h "$out/window.png" | cut -f1))"
# Last, so that everything above ran on the package's dependencies alone.
echo "== the desktop entry (desktop-file-validate) and its icon"
in_root apt-get install -y -q --no-install-recommends desktop-file-utils >>"$out/apt.log" 2>&1 ||
  fail "cannot install desktop-file-utils: $(tail -n 5 "$out/apt.log")"
in_root desktop-file-validate /usr/share/applications/flotilla.desktop ||
  fail "/usr/share/applications/flotilla.desktop is not a valid desktop entry"
icon=$(in_root sh -c 'sed -n "s/^Icon=//p" /usr/share/applications/flotilla.desktop')
[[ -f $root/usr/share/icons/hicolor/scalable/apps/$icon.svg ]] ||
  fail "the desktop entry's Icon=$icon is not installed in the hicolor theme"
echo "flotilla.desktop is valid; Icon=$icon is /usr/share/icons/hicolor/scalable/apps/$icon.svg"
echo "package_check: the package installs and runs on a clean Debian 12"
