#!/bin/sh
# Makes docs/desktop-menu.png: RunOS Desktop's menu open in a real tray
# (xfce4-panel's status tray on Xvfb, clicked with xdotool, captured with
# ImageMagick's import), against a stand-in daemon speaking the real local
# API. Needs the Debian packages xvfb xfce4-panel xfconf dbus dbus-x11
# xdotool imagemagick. Usage: desktop/screenshot.sh [OUT.png]
set -eu
cd "$(dirname "$0")/.."
out="${1:-$PWD/docs/desktop-menu.png}"
mkdir -p "$(dirname "$out")"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# RUNOS_E2E=1: a missing tool fails the run instead of skipping it.
if ! RUNOS_E2E=1 go test -count=1 -run '^TestScreenshot$' ./desktop/apptest -screenshot="$out" -v >"$log" 2>&1; then
	cat "$log" >&2
	exit 1
fi
grep 'wrote' "$log"
