#!/bin/bash
# Screenshots of each workbench page for docs/workbench.md.
#   tools/screenshots.sh [BUILD_DIR]        (default: build)
# Starts a virtual X server (Debian package xvfb), runs `mok-workbench --screenshots`
# against a fresh demo database — two tiny runs trained for real — and writes
# docs/screenshots/{setup,runs,live,compare}.png.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
BIN="$BUILD/app/mok-workbench"
OUT="$ROOT/docs/screenshots"
[ -x "$BIN" ] || { echo "no $BIN: build the mok-workbench target first" >&2; exit 1; }
command -v Xvfb >/dev/null || { echo "Xvfb not found: apt-get install xvfb" >&2; exit 1; }

WORK="$(mktemp -d)"
DISPLAY_NUM=":$((90 + RANDOM % 100))"
Xvfb "$DISPLAY_NUM" -screen 0 1680x1050x24 -nolisten tcp >"$WORK/xvfb.log" 2>&1 &
XVFB_PID=$!
cleanup() { kill "$XVFB_PID" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${DISPLAY_NUM#:}" ] && break; sleep 0.1; done

mkdir -p "$OUT"
cd "$WORK"
# XDG_CONFIG_HOME: the demo keeps its settings (the last Setup config) in its own folder.
DISPLAY="$DISPLAY_NUM" QT_QPA_PLATFORM=xcb MOK_EXPERIMENTS_DIR="$ROOT/experiments" XDG_CONFIG_HOME="$WORK/config" \
  "$BIN" --db "$WORK/demo.db" --screenshots "$OUT"
echo "screenshots in $OUT"
