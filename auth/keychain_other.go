//go:build !(linux || freebsd || openbsd || netbsd || dragonfly)

package auth

// keychainReachable: the macOS Keychain and the Windows Credential Manager
// are always there for a logged-in user.
func keychainReachable(func(string) string, func(string) bool) bool { return true }
