#!/bin/sh
# Builds "RunOS Desktop.app" (what `make desktop-macos` runs). It must run on
# a Mac with the Xcode command-line tools: fyne.io/systray drives AppKit
# through cgo, so it cannot be cross-compiled from Linux.
#
#   desktop/macos/build-app.sh [OUTDIR] [VERSION]
#
# OUTDIR defaults to bin, VERSION to `git describe`. ARCHS (default
# "arm64 amd64") picks the architectures of the universal binary;
# CODESIGN_IDENTITY (default "-", ad hoc) the signing identity. The bundle
# is what `runos desktop install` copies to /Applications; its LaunchAgent
# runs Contents/MacOS/runos-desktop --at-login.
set -eu
cd "$(dirname "$0")/../.."
out="${1:-bin}"
version="${2:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
archs="${ARCHS:-arm64 amd64}"
if [ "$(uname -s)" != Darwin ]; then
	echo "build-app.sh: RunOS Desktop for macOS needs cgo and AppKit; run this on a Mac" >&2
	exit 1
fi
app="$out/RunOS Desktop.app"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pkg=github.com/runos/vpn/internal/version
ldflags="-s -w -X $pkg.Version=$version -X $pkg.Commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) -X $pkg.Date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"

bins=""
for arch in $archs; do
	echo "building runos-desktop for darwin/$arch"
	CGO_ENABLED=1 GOOS=darwin GOARCH="$arch" go build -trimpath -ldflags "$ldflags" -o "$tmp/runos-desktop-$arch" ./cmd/runos-desktop
	bins="$bins $tmp/runos-desktop-$arch"
done

rm -rf "$app"
mkdir -p "$app/Contents/MacOS" "$app/Contents/Resources"
# shellcheck disable=SC2086 # one argument per binary
lipo -create -output "$app/Contents/MacOS/runos-desktop" $bins
sed "s/@VERSION@/$version/g" desktop/macos/Info.plist >"$app/Contents/Info.plist"
plutil -lint "$app/Contents/Info.plist"
go run ./desktop/icons/internal/gen -iconset "$tmp/RunOS.iconset"
iconutil -c icns "$tmp/RunOS.iconset" -o "$app/Contents/Resources/RunOS.icns"
codesign --force --options runtime --sign "${CODESIGN_IDENTITY:--}" "$app"
codesign --verify --verbose "$app"
echo "built $app ($version; $(lipo -archs "$app/Contents/MacOS/runos-desktop"))"
