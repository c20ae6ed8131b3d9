//go:build linux || freebsd || openbsd || netbsd || dragonfly

package auth

import "path/filepath"

// keychainReachable reports whether a session bus is there to ask for the
// Secret Service. Without one, go-keyring's D-Bus library would run
// dbus-launch and leave a bus daemon behind just to learn there is no
// keychain; so no bus means no keychain, and the file is used.
func keychainReachable(getenv func(string) string, exists func(string) bool) bool {
	if a := getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" && a != "autolaunch:" {
		return true
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return exists(filepath.Join(d, "bus"))
	}
	return false
}
