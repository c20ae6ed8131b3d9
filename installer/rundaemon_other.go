//go:build !windows

package installer

import "context"

// RunDaemon runs the daemon's body. systemd, System V init and launchd
// stop a service with SIGTERM, which ctx (signal.NotifyContext in main)
// already carries, so here it just runs it. cleanup is not run here: the
// service definitions run `runos vpnd --cleanup` after the daemon's
// process exits (systemd's ExecStopPost=, the System V supervisor, the
// launchd wrapper), which also covers a daemon that crashed or was killed.
func RunDaemon(ctx context.Context, run, _ func(ctx context.Context) error) error {
	return run(ctx)
}
