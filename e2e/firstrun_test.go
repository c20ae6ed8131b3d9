//go:build linux

package e2e

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runos/vpn/internal/syncbuf"
)

// deviceLine is how the CLI prints the device code.
var deviceLine = regexp.MustCompile(`To sign in, visit (\S+) and enter the code (\S+)`)

// startOn starts argv on a laptop with extra environment, its output
// (both streams) into out; the returned wait ends it.
func (w *world) startOn(ctx context.Context, host string, extra []string, stdin *os.File, out *syncbuf.Buffer, argv ...string) func() error {
	w.t.Helper()
	cmd, err := w.lab.Command(ctx, host, extra, argv...)
	if err != nil {
		w.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if stdin != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdin, stdin
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	return cmd.Wait
}

// approveCode signs the lab's user in at the device-code page, with the
// laptop's scripted browser.
func (w *world) approveCode(host, uri, code string) {
	w.t.Helper()
	w.must(host, nil, "sh", "-c", `exec "$BROWSER" "$1"`, "approve", uri+"?user_code="+code)
}

// TestFirstRunHeadless: with no display and no $BROWSER (an SSH session
// to a server), runos vpn up goes straight to the device code: the URL
// and code printed once, no browser launcher tried, nothing about a
// browser failing.
func TestFirstRunHeadless(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out syncbuf.Buffer
	wait := w.startOn(ctx, laptop, []string{"BROWSER=", "DISPLAY=", "WAYLAND_DISPLAY=", "SSH_CONNECTION=198.51.100.7 50000 10.0.0.2 22"}, nil, &out,
		"runos", "vpn", "up", "--cid", "ky3")
	var m []string
	w.waitFor(time.Minute, "the device code printed", func() bool { m = deviceLine.FindStringSubmatch(out.String()); return m != nil })
	if n := w.browserLaunches(laptop); n != 0 {
		t.Errorf("the scripted browser was launched %d times by vpn up", n)
	}
	w.approveCode(laptop, m[1], m[2])
	if err := wait(); err != nil {
		t.Fatalf("vpn up: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, bad := range []string{"browser", "xdg-open", "www-browser", "not found", "Could not open"} {
		if strings.Contains(strings.ToLower(got), strings.ToLower(bad)) {
			t.Errorf("headless vpn up printed %q:\n%s", bad, got)
		}
	}
	if n := strings.Count(got, "To sign in, visit"); n != 1 {
		t.Errorf("the code printed %d times:\n%s", n, got)
	}
	if !strings.Contains(got, "ky3 is up") {
		t.Errorf("vpn up did not connect:\n%s", got)
	}

	// After runos vpn down the status says the tunnel is down.
	w.must(laptop, nil, "runos", "vpn", "down")
	st := w.stdout(laptop, nil, "runos", "vpn", "status")
	if !regexp.MustCompile(`(?m)^Tunnel +down: signed out`).MatchString(st) || strings.Contains(st, " up,") {
		t.Errorf("status after vpn down:\n%s", st)
	}
}

// openPTY opens a pseudo-terminal pair (posix_openpt, unlockpt, ptsname).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// TestFirstRunPicker: two clusters and no default, on a terminal (a
// pseudo-terminal this test types into), runos vpn up asks which one,
// connects it, and remembers it when told to; without a terminal it
// keeps its error naming the clusters.
func TestFirstRunPicker(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	w.run(laptop, nil, "runos", "config", "unset", "cid")
	// Signed in first (the scripted browser), so that the question is
	// the only thing asked.
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.must(laptop, nil, "runos", "vpn", "disconnect", "ky3")

	// No terminal: today's error.
	out, err := w.run(laptop, nil, "runos", "vpn", "up")
	if err == nil || !strings.Contains(out, "your account has 2 clusters") || !strings.Contains(out, "runos config set cid <cid>") {
		t.Fatalf("vpn up without a terminal: %v\n%s", err, out)
	}

	master, slave := openPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var screen syncbuf.Buffer
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			screen.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	wait := w.startOn(ctx, laptop, []string{"TERM=xterm"}, slave, nil, "runos", "vpn", "up")
	w.waitFor(time.Minute, "the question which cluster", func() bool { return strings.Contains(screen.String(), "Connect which one? [1-2]") })
	clusters := regexp.MustCompile(`(?m)^\s+2\) (\S+)`).FindStringSubmatch(screen.String())
	if clusters == nil {
		t.Fatalf("no second cluster offered:\n%s", screen.String())
	}
	second := strings.TrimSpace(clusters[1])
	master.WriteString("2\n")
	w.waitFor(time.Minute, "the question whether to remember", func() bool {
		return strings.Contains(screen.String(), "your default (runos config set cid "+second+")? [y/N]")
	})
	master.WriteString("y\n")
	if err := wait(); err != nil {
		t.Fatalf("vpn up on a terminal: %v\n%s", err, screen.String())
	}
	// The terminal may still be carrying the last lines when up exits.
	w.waitFor(10*time.Second, second+" is up on the terminal", func() bool { return strings.Contains(screen.String(), second+" is up") })
	if got := strings.TrimSpace(w.stdout(laptop, nil, "runos", "config", "get", "cid")); got != second {
		t.Errorf("remembered cid %q, want %q", got, second)
	}
}
