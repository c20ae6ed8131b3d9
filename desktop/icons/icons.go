// Package icons holds RunOS Desktop's tray icons, one per menu.Icon, drawn
// at build time by internal/draw (`go generate ./desktop/icons`) and
// embedded. Tray returns the image in the format this OS's tray takes (ICO
// on Windows, PNG elsewhere); Template is the alpha-only variant macOS
// tints for the menu bar.
package icons

import (
	"embed"

	"github.com/runos/vpn/desktop/menu"
)

//go:generate go run ./internal/gen data

//go:embed data
var files embed.FS

func file(name string) []byte {
	b, err := files.ReadFile("data/" + name)
	if err != nil {
		panic("icons: missing " + name + " (run go generate ./desktop/icons)")
	}
	return b
}

// Tray is the icon for i in this OS's tray format.
func Tray(i menu.Icon) []byte { return file(i.String() + trayExt) }

// Template is the macOS template image for i (black and alpha only).
func Template(i menu.Icon) []byte { return file(i.String() + "-template.png") }

// PNG is the 32-pixel PNG for i on every OS (docs, notifications).
func PNG(i menu.Icon) []byte { return file(i.String() + ".png") }
