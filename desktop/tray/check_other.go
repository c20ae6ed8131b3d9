//go:build !linux

package tray

// Check says why the tray cannot work here; the macOS menu bar and the
// Windows notification area are always there.
func Check() error { return nil }

// HasHost reports whether something shows the tray: always, here.
func HasHost() bool { return true }
