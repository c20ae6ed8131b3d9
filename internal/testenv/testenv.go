// Package testenv is the one place a test decides that it cannot run
// here: for want of Linux, root, a command, or an address. Every skip goes
// through it, so that under RUNOS_E2E=1 (what `make test` sets when run as
// root, and .ci/run always) a test that would skip fails instead, saying
// what is missing: CI never prints ok for a test that did not run.
// RUNOS_E2E=0, or unset, allows the skips.
//
// It is not for tests that are not tests on their own (a helper process a
// parent test starts, a tool run by hand): OnlyAsHelper and OnlyWhenAsked
// mark those, and never fail.
package testenv

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// Strict reports whether a skip must fail the test (RUNOS_E2E=1).
func Strict() bool { return os.Getenv("RUNOS_E2E") == "1" }

// Skip skips the test because of why (what it needs and lacks here), or
// fails it under RUNOS_E2E=1.
func Skip(t testing.TB, why string) {
	t.Helper()
	if Strict() {
		t.Fatalf("RUNOS_E2E=1 but this test %s", why)
	}
	t.Skip(why)
}

// Tools skips (or under RUNOS_E2E=1 fails) unless every command is on PATH.
func Tools(t testing.TB, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			Skip(t, "needs "+c+" on PATH (see .ci/packages for the Debian package)")
		}
	}
}

// Root skips (or fails) unless the test runs as root on Linux; what says
// what for ("network namespaces").
func Root(t testing.TB, what string) {
	t.Helper()
	switch {
	case runtime.GOOS != "linux":
		Skip(t, "needs Linux "+what)
	case os.Geteuid() != 0:
		Skip(t, "needs root for "+what)
	}
}

// OnlyAsHelper skips a test that is the inside of another (run in its own
// process or namespace by parent, which sets env): alone it tests nothing,
// and its parent fails if it does not pass.
func OnlyAsHelper(t testing.TB, env, parent string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skip("runs inside " + parent)
	}
	return v
}

// OnlyWhenAsked skips a test that is a tool run by hand (how says how),
// unless asked.
func OnlyWhenAsked(t testing.TB, asked bool, how string) {
	t.Helper()
	if !asked {
		t.Skip(how)
	}
}
