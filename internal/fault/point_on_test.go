//go:build runosfault

package fault

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]struct {
		name string
		n    int
	}{
		"a": {"a", 1}, "a@3": {"a", 3}, "a@0": {"a", 1}, "a@x": {"a", 1}, "": {"", 1},
	} {
		if n, c := parse(in); n != want.name || c != want.n {
			t.Errorf("parse(%q) = %q, %d; want %q, %d", in, n, c, want.name, want.n)
		}
	}
}

// TestPointStopsDead re-runs this test binary with RUNOS_FAULT set: it must
// pass the first hit of the point, stop at the second with ExitCode, and
// run no deferred function.
func TestPointStopsDead(t *testing.T) {
	if os.Getenv("FAULT_CHILD") == "1" {
		defer fmt.Println("deferred ran")
		Point("other")
		Point("p")
		fmt.Println("after first hit")
		Point("p")
		fmt.Println("after second hit")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPointStopsDead$")
	cmd.Env = append(os.Environ(), "FAULT_CHILD=1", "RUNOS_FAULT=p@2")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitCode {
		t.Fatalf("exit: %v, want status %d\n%s", err, ExitCode, out)
	}
	s := string(out)
	if !strings.Contains(s, "after first hit") || strings.Contains(s, "after second hit") || strings.Contains(s, "deferred ran") ||
		!strings.Contains(s, "fault: stopped dead at p@2") {
		t.Fatalf("output:\n%s", s)
	}
}
