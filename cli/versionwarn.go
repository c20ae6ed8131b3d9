package cli

import (
	"fmt"

	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/platform"
)

// warnDaemonVersion warns on stderr when the daemon runs another build
// than this command: after an upgrade of runos the service still runs the
// old one until it is installed again. Every command that talks to the
// daemon calls it with the first status it gets; it warns once.
func (a *app) warnDaemonVersion(daemon string) {
	if daemon == "" || daemon == version.Version || a.versionWarned {
		return
	}
	a.versionWarned = true
	fmt.Fprintf(a.env.Stderr, "warning: the daemon runs %s but this runos is %s: run `%s` to update the daemon\n", daemon, version.Version, platform.AdminCommand("vpn install"))
}
