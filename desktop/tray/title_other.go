//go:build !darwin

package tray

import "fyne.io/systray"

// setTitle names the item for the tray host (the StatusNotifierItem Title
// on Linux; ignored on Windows).
func setTitle(s string) { systray.SetTitle(s) }
