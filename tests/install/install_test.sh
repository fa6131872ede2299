#!/usr/bin/env bash
# cmake --install of a build tree as a package does it (prefix /usr, staged
# under DESTDIR), then a look at what landed: the programs, the presets, the
# desktop entry and the icon.
#   install_test.sh BUILD_DIR GUI(0|1) ENGINE(0|1)
set -euo pipefail
build=$1 gui=$2 engine=$3
destdir=$(mktemp -d)
trap 'rm -rf "$destdir"' EXIT
DESTDIR=$destdir cmake --install "$build" --prefix /usr >/dev/null
prefix=$destdir/usr
failed=0
expect() {
  if [[ ! -e $prefix/$1 ]]; then
    echo "install_test: $1 is not installed" >&2
    failed=1
  fi
}
expect bin/flotilla-agent
if [[ $engine == 1 ]]; then expect bin/flotilla-train; fi
if [[ $gui == 1 ]]; then
  expect bin/flotilla
  expect bin/flotilla-gui
  expect share/applications/flotilla.desktop
  expect share/icons/hicolor/scalable/apps/flotilla.svg
fi
# Everything under the prefix: an absolute DESTINATION would escape it.
outside=$(find "$destdir" -mindepth 1 -maxdepth 1 ! -name usr)
if [[ -n $outside ]]; then
  echo "install_test: installed outside the prefix /usr: $outside" >&2
  failed=1
fi
presets=$(find "$prefix/share/flotilla/presets" -name '*.yaml' 2>/dev/null | wc -l)
if [[ $presets -eq 0 ]]; then
  echo "install_test: no preset under share/flotilla/presets" >&2
  failed=1
fi
[[ $failed == 0 ]] || exit 1
if [[ $gui == 1 ]]; then
  if command -v desktop-file-validate >/dev/null; then
    desktop-file-validate "$prefix/share/applications/flotilla.desktop"
  fi
  # The installed CLI starts and answers.
  "$prefix/bin/flotilla" --help | grep -q "flotilla" || {
    echo "install_test: the installed flotilla does not answer --help" >&2
    exit 1
  }
  # The window's help needs no display: no DISPLAY, no platform asked for.
  env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM "$prefix/bin/flotilla-gui" --help |
    grep -q -- "--render" || {
    echo "install_test: the installed flotilla-gui does not answer --help without a display" >&2
    exit 1
  }
fi
echo "install_test: $(find "$prefix" -type f | wc -l) files installed, $presets presets"
