package installer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/internal/testenv"
)

// fakeRunos stands in for runos under the init script: `vpnd …` records
// its pid and runs until SIGTERM, `vpnd --cleanup …` records the clean-up.
const fakeRunos = `#!/bin/sh
events=@EVENTS@
case "$2" in
--cleanup) echo "cleanup $*" >> "$events"; exit 0 ;;
esac
echo "start $$ $*" >> "$events"
trap 'echo "term $$" >> "$events"; exit 0' TERM
while :; do sleep 0.05; done
`

// TestSysVScriptForReal runs the rendered init script (no root, nothing
// installed: every path is in a temporary directory): start supervises the
// daemon, a crash is cleaned up after and restarted, stop ends both and
// cleans up, and nothing is left running.
func TestSysVScriptForReal(t *testing.T) {
	testenv.Tools(t, "sh", "setsid", "tr", "grep")
	dir := t.TempDir()
	events := filepath.Join(dir, "events")
	bin := filepath.Join(dir, "bin dir", "runos")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.WriteFile(bin, []byte(strings.ReplaceAll(fakeRunos, "@EVENTS@", shellQuote(events))), 0o755); err != nil {
		t.Fatal(err)
	}
	s := Spec{Name: "runos-vpnd-test", Description: description, Binary: bin,
		StateDir: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "vpnd.sock"), Interface: "wgt0",
		LogFile: filepath.Join(dir, "log", "runos-vpnd-test.log"), PIDFile: filepath.Join(dir, "run", "runos-vpnd-test.pid")}
	script := filepath.Join(dir, "init.d", s.Name)
	os.MkdirAll(filepath.Dir(script), 0o755)
	if err := os.WriteFile(script, []byte(sysvScript(s)), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s", err, out)
	}
	initd := func(action string) (string, error) {
		out, err := exec.Command(script, action).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		initd("stop")
		if t.Failed() {
			b, _ := os.ReadFile(s.LogFile)
			e, _ := os.ReadFile(events)
			t.Logf("log:\n%s\nevents:\n%s", b, e)
		}
	})
	daemonPID := func() int {
		b, _ := os.ReadFile(s.PIDFile + ".daemon")
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	starts := func() []string {
		b, _ := os.ReadFile(events)
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "start ") {
				out = append(out, l)
			}
		}
		return out
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	if out, err := initd("status"); err == nil || !strings.Contains(out, "Stopped") {
		t.Errorf("status before start: %v %q", err, out)
	}
	if out, err := initd("start"); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	eventually("the daemon starts", func() bool { return len(starts()) == 1 && daemonPID() > 0 })
	if want := "vpnd --state-dir " + s.StateDir + " --socket " + s.Socket + " --interface wgt0"; !strings.HasSuffix(starts()[0], want) {
		t.Errorf("daemon started as %q, want ...%q", starts()[0], want)
	}
	if out, err := initd("status"); err != nil || !strings.Contains(out, "Running") {
		t.Errorf("status: %v %q", err, out)
	}
	if out, _ := initd("start"); !strings.Contains(out, "Already running") {
		t.Errorf("second start: %q", out)
	}

	// A crash: cleaned up after, then started again.
	first := daemonPID()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually("the daemon restarts after a crash", func() bool { return len(starts()) == 2 && daemonPID() > 0 && daemonPID() != first })
	if b, _ := os.ReadFile(events); !strings.Contains(string(b), "cleanup vpnd --cleanup --state-dir "+s.StateDir) {
		t.Errorf("no clean-up after the crash:\n%s", b)
	}
	b, _ := os.ReadFile(s.PIDFile)
	supervisor, _ := strconv.Atoi(strings.TrimSpace(string(b)))

	// Stop: SIGTERM reaches the daemon, the clean-up runs, nothing is left.
	second := daemonPID()
	if out, err := initd("stop"); err != nil || !strings.Contains(out, "Stopped") {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	e, _ := os.ReadFile(events)
	lines := strings.Split(strings.TrimSpace(string(e)), "\n")
	if n := len(lines); n < 2 || lines[n-2] != "term "+strconv.Itoa(second) || !strings.HasPrefix(lines[n-1], "cleanup ") {
		t.Errorf("stop did not end with the daemon's SIGTERM and the clean-up:\n%s", e)
	}
	for _, pid := range []int{supervisor, second} {
		eventually("process "+strconv.Itoa(pid)+" ends", func() bool { return !alive(pid) })
	}
	for _, f := range []string{s.PIDFile, s.PIDFile + ".daemon"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left behind", f)
		}
	}
	if out, _ := initd("stop"); !strings.Contains(out, "Not running") {
		t.Errorf("stop when stopped: %q", out)
	}
	if log, _ := os.ReadFile(s.LogFile); !strings.Contains(string(log), "exited with status 137") {
		t.Errorf("the log does not tell the crash:\n%s", log)
	}
}

// alive reports whether pid runs (a zombie waiting for its parent to reap
// it does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
