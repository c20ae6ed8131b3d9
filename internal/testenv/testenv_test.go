package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A skip becomes a failure under RUNOS_E2E=1: run in a child process, the
// skipping test fails, naming what it lacks.
func TestSkipFailsUnderE2E(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		Tools(t, "no-such-command-runos")
		return
	}
	for _, e2e := range []string{"1", "0", ""} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSkipFailsUnderE2E$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "RUNOS_E2E="+e2e)
		out, err := cmd.CombinedOutput()
		switch {
		case e2e == "1" && (err == nil || !strings.Contains(string(out), "RUNOS_E2E=1 but this test needs no-such-command-runos on PATH")):
			t.Errorf("RUNOS_E2E=1: %v\n%s", err, out)
		case e2e != "1" && (err != nil || !strings.Contains(string(out), "--- SKIP")):
			t.Errorf("RUNOS_E2E=%q: %v\n%s", e2e, err, out)
		}
	}
}
