// Command gen writes desktop/icons/data: for every menu.Icon a 32-pixel
// PNG, the Linux tray's PNG (see draw.SNIPNG), a 32-pixel template PNG (the
// macOS menu bar, shown at 16 points) and an ICO with 16 and 32 pixels
// (Windows). Run it through `go generate ./desktop/icons`.
//
// `gen -iconset DIR.iconset` writes the macOS app icon's iconset instead,
// for iconutil (desktop/macos/build-app.sh).
package main

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"

	"github.com/runos/vpn/desktop/icons/internal/draw"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-iconset" {
		iconset(os.Args[2])
		return
	}
	dir := "data"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	for name, b := range draw.Files() {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			fail(err)
		}
	}
}

// iconset writes icon_<n>x<n>[@2x].png as iconutil wants them.
func iconset(dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	for _, n := range []int{16, 32, 128, 256, 512} {
		for _, scale := range []int{1, 2} {
			name := fmt.Sprintf("icon_%dx%d.png", n, n)
			if scale == 2 {
				name = fmt.Sprintf("icon_%dx%d@2x.png", n, n)
			}
			var buf bytes.Buffer
			if err := png.Encode(&buf, draw.AppImage(n*scale)); err != nil {
				fail(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
				fail(err)
			}
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}
