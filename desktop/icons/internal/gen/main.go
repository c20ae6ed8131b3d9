// Command gen writes desktop/icons/data: for every menu.Icon a 32-pixel
// PNG (Linux trays), a 32-pixel template PNG (the macOS menu bar, shown at
// 16 points) and an ICO with 16 and 32 pixels (Windows). Run it through
// `go generate ./desktop/icons`.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/runos/vpn/desktop/icons/internal/draw"
)

func main() {
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

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}
