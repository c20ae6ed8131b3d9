//go:build !windows

package icons

// StatusNotifierItem hosts and AppKit take PNG.
const trayExt = ".png"
