//go:build !windows

package installer

import "context"

// RunDaemon runs the daemon's body. systemd, System V init and launchd
// stop a service with SIGTERM, which ctx (signal.NotifyContext in main)
// already carries, so here it just runs it.
func RunDaemon(ctx context.Context, run func(ctx context.Context) error) error { return run(ctx) }
