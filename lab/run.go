//go:build !windows

package lab

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Runner runs a system command (ip, mount, unshare…) to completion. The
// lab shells out to iproute2 and util-linux on purpose: these are the
// commands an operator uses to inspect what the lab built. Tests inject a
// recording Runner.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) (string, error)
}

// ExecRunner runs commands with os/exec.
type ExecRunner struct{}

// Run runs the command and returns its combined output; a failure carries
// the command line and what it printed.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err,
			strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
