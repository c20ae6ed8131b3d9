// Package netnstest gives root tests real network namespaces joined by veth
// pairs, and runs commands inside them, cleaning everything up when the test
// ends (also when it fails). It shells out to iproute2 on purpose: these are
// the same commands an operator would use to inspect what a test built.
package netnstest

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// Require skips the test unless it runs as root on Linux with the named
// commands on PATH. Under RUNOS_E2E=1 a missing requirement fails the test
// instead: CI must never skip silently.
func Require(t testing.TB, cmds ...string) {
	t.Helper()
	why := ""
	switch {
	case runtime.GOOS != "linux":
		why = "needs Linux network namespaces"
	case os.Geteuid() != 0:
		why = "needs root for network namespaces"
	}
	for _, c := range cmds {
		if why != "" {
			break
		}
		if _, err := exec.LookPath(c); err != nil {
			why = "needs " + c + " on PATH (see .ci/run for the Debian package)"
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("RUNOS_E2E") == "1" {
		t.Fatalf("RUNOS_E2E=1 but this test %s", why)
	}
	t.Skip(why)
}
