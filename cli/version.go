package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/localapi"
)

// versionInfo is the --json form of runos version.
type versionInfo struct {
	Version     string            `json:"version"`
	Commit      string            `json:"commit"`
	Date        string            `json:"date"`
	Daemon      *localapi.Version `json:"daemon,omitempty"`
	DaemonError string            `json:"daemonError,omitempty"`
	Mismatch    bool              `json:"mismatch"` // the daemon runs another version
}

func (a *app) versionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date, and the daemon's",
		Long: `Print this command's version, commit and build date, and the running
daemon's. When they differ it warns: reinstall the service with
` + platform.AdminCommand("vpn install") + ` so that both are the same build.`,
		Example: `  runos version
  runos version --json`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			v := a.versions(cmd.Context())
			if v.Mismatch {
				fmt.Fprintf(a.env.Stderr, "warning: the daemon runs %s but this command is %s: run `%s` to update the daemon\n",
					v.Daemon.Version, v.Version, platform.AdminCommand("vpn install"))
			}
			if asJSON {
				return printJSON(a.env.Stdout, v)
			}
			fmt.Fprintf(a.env.Stdout, "runos  %s (commit %s, built %s)\n", v.Version, v.Commit, v.Date)
			if v.Daemon != nil {
				fmt.Fprintf(a.env.Stdout, "daemon %s (commit %s, built %s)\n", v.Daemon.Version, v.Daemon.Commit, v.Daemon.Date)
			} else {
				fmt.Fprintf(a.env.Stdout, "daemon not reachable: %s\n", v.DaemonError)
			}
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the versions as JSON")
	a.addSocketFlag(c)
	return c
}

func (a *app) versions(ctx context.Context) versionInfo {
	v := versionInfo{Version: version.Version, Commit: version.Commit, Date: version.Date}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	dv, err := a.daemon().Version(ctx)
	if err != nil {
		v.DaemonError = err.Error()
		return v
	}
	v.Daemon = dv
	v.Mismatch = dv.Version != v.Version || dv.Commit != v.Commit
	return v
}
