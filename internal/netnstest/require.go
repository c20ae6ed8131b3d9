package netnstest

import (
	"testing"

	"github.com/runos/vpn/internal/testenv"
)

// Require skips the test unless it runs as root on Linux with the named
// commands on PATH. Under RUNOS_E2E=1 a missing requirement fails the test
// instead (internal/testenv): CI must never skip silently.
func Require(t testing.TB, cmds ...string) {
	t.Helper()
	testenv.Root(t, "network namespaces")
	testenv.Tools(t, cmds...)
}
