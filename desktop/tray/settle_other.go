//go:build !linux

package tray

// settle has nothing to do where the tray is set synchronously.
func settle(*Tray) {}
