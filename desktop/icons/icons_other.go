//go:build !windows && !linux && !freebsd && !openbsd && !netbsd

package icons

// AppKit takes PNG.
const trayExt = ".png"
