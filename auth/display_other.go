//go:build darwin || windows

package auth

// noDisplay: macOS and Windows always have a desktop, but a browser
// opened from an SSH session shows on it, not to the user at the other
// end.
func noDisplay(getenv func(string) string) string {
	if getenv("SSH_CONNECTION") != "" || getenv("SSH_TTY") != "" {
		return "an SSH session (SSH_CONNECTION is set)"
	}
	return ""
}
