package auth

import "strings"

// errNoDisplay is why the system's browser is not even tried: nothing
// could show it (no display on Linux, an SSH session). SignIn then goes
// straight to the device code, without the launcher's error lines.
type errNoDisplay struct{ why string }

func (e errNoDisplay) Error() string { return e.why }

// headless says why no browser can be shown here, or "" when one can.
// $BROWSER set is the user's choice (a text browser, a script) and is
// always tried.
func headless(getenv func(string) string) string {
	if getenv == nil || strings.TrimSpace(getenv("BROWSER")) != "" {
		return ""
	}
	return noDisplay(getenv)
}
