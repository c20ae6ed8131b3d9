//go:build linux || darwin

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

// fakeLaunchdRunos stands in for runos under the launchd wrapper: `vpnd
// --cleanup …` records the clean-up; `vpnd …` records its pid and runs
// until SIGTERM, or fails at once with status 3 when the file fail exists.
const fakeLaunchdRunos = `#!/bin/sh
events=@EVENTS@
case "$2" in
--cleanup) echo "cleanup $*" >> "$events"; exit 0 ;;
esac
trap 'echo "term $$" >> "$events"; sleep 0.2; echo "stopped $$" >> "$events"; exit 0' TERM
echo "start $$ $*" >> "$events"
[ ! -e "$(dirname "$events")/fail" ] || exit 3
while :; do sleep 0.05; done
`

// TestLaunchdWrapperForReal runs the wrapper of the rendered plist as
// launchd would (sh -c SCRIPT NAME), under every POSIX sh found here (macOS's
// /bin/sh is bash in POSIX mode, or dash): a stop passes SIGTERM on, waits
// for the daemon's teardown and cleans up; a crash and a failure are
// cleaned up after and exit with the daemon's status, for KeepAlive.
func TestLaunchdWrapperForReal(t *testing.T) {
	shells := map[string][]string{}
	for name, argv := range map[string][]string{"sh": {"sh"}, "dash": {"dash"}, "bash-posix": {"bash", "--posix"}} {
		if p, err := exec.LookPath(argv[0]); err == nil {
			shells[name] = append([]string{p}, argv[1:]...)
		}
	}
	if len(shells) == 0 {
		testenv.Tools(t, "sh")
	}
	for name, shell := range shells {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			events := filepath.Join(dir, "events")
			bin := filepath.Join(dir, "bin dir", "runos")
			os.MkdirAll(filepath.Dir(bin), 0o755)
			if err := os.WriteFile(bin, []byte(strings.ReplaceAll(fakeLaunchdRunos, "@EVENTS@", shellQuote(events))), 0o755); err != nil {
				t.Fatal(err)
			}
			s := Spec{Name: "com.runos.vpnd-test", Binary: bin, StateDir: filepath.Join(dir, "state dir"),
				Socket: filepath.Join(dir, "vpnd.sock"), Interface: "utun7", LogFile: filepath.Join(dir, "log")}
			keys, args := parsePlist(t, launchdPlist(s))
			if keys["KeepAlive"] != "true" || len(args) != 4 {
				t.Fatalf("plist keys %v, args %q", keys, args)
			}
			lines := func() []string {
				b, _ := os.ReadFile(events)
				return strings.Split(strings.TrimSpace(string(b)), "\n")
			}
			// start runs the job as launchd does and returns it with its
			// output and the daemon's pid once the daemon runs.
			start := func() (*exec.Cmd, *strings.Builder, int) {
				os.Remove(events)
				out := &strings.Builder{}
				cmd := exec.Command(shell[0], append(shell[1:], args[1:]...)...)
				cmd.Stdout, cmd.Stderr = out, out
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if l := lines(); strings.HasPrefix(l[0], "start ") {
						pid, _ := strconv.Atoi(strings.Fields(l[0])[1])
						return cmd, out, pid
					}
					if time.Now().After(deadline) {
						t.Fatal("the daemon never started")
					}
				}
			}
			exitCode := func(cmd *exec.Cmd) int {
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					if err == nil {
						return 0
					}
					if ee, ok := err.(*exec.ExitError); ok {
						return ee.ExitCode()
					}
					t.Fatal(err)
				case <-time.After(15 * time.Second):
					t.Fatalf("the wrapper did not exit; events %q", lines())
				}
				return -1
			}
			wantCleanup := "cleanup vpnd --cleanup --state-dir " + s.StateDir + " --socket " + s.Socket + " --interface utun7"

			// Stop (launchctl bootout): SIGTERM to the job's process.
			cmd, out, pid := start()
			if want := "vpnd --state-dir " + s.StateDir + " --socket " + s.Socket + " --interface utun7"; !strings.HasSuffix(lines()[0], want) {
				t.Errorf("daemon started as %q, want …%q", lines()[0], want)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := exitCode(cmd); code != 0 {
				t.Errorf("stopped: exit %d, want 0\n%s", code, out)
			}
			p := strconv.Itoa(pid)
			if got := strings.Join(lines()[1:], "\n"); got != "term "+p+"\nstopped "+p+"\n"+wantCleanup {
				t.Errorf("stop: events after the start\n%s\nwant the daemon's SIGTERM, its teardown, then the clean-up", got)
			}
			if !strings.Contains(out.String(), "com.runos.vpnd-test: runos vpnd exited with status 0; cleaning up") {
				t.Errorf("output %q", out)
			}

			// A crash: cleaned up after, the status passed on.
			cmd, out, pid = start()
			syscall.Kill(pid, syscall.SIGKILL)
			if code := exitCode(cmd); code != 137 {
				t.Errorf("crashed: exit %d, want 137\n%s", code, out)
			}
			if l := lines(); l[len(l)-1] != wantCleanup {
				t.Errorf("crash: no clean-up after it: %q", l)
			}

			// A failure at start.
			os.WriteFile(filepath.Join(dir, "fail"), nil, 0o600)
			cmd, out, _ = start()
			if code := exitCode(cmd); code != 3 {
				t.Errorf("failed: exit %d, want 3\n%s", code, out)
			}
			if l := lines(); len(l) != 2 || l[1] != wantCleanup {
				t.Errorf("failure: events %q", l)
			}
		})
	}
}
