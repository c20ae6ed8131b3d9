//go:build !darwin && !windows

package auth

// noDisplay: on Linux and the BSDs a browser needs X11 or Wayland; over
// SSH with X forwarding DISPLAY is set and the browser shows there.
func noDisplay(getenv func(string) string) string {
	if getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "" {
		return "no display (DISPLAY and WAYLAND_DISPLAY are not set)"
	}
	return ""
}
