package vpnd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/fault"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestDaemonDNSFaults stops the real daemon dead (os.Exit, no deferred
// function, as a crash or kill -9 would) at each named point of a DNS
// change (internal/fault; the daemon is `runos` built with the runosfault
// tag), in a laptop namespace whose /etc/resolv.conf is bind-mounted (as
// `ip netns exec`, containers and the lab's laptops have it: rewritten in
// place) and in one where it is a plain file (replaced by rename). After
// each stop, `runos vpnd --cleanup` must leave the original bytes, public
// names must resolve, and a restart must leave either the original or the
// daemon's valid split configuration (cluster names private, public names
// public), and down the original again.
func TestDaemonDNSFaults(t *testing.T) {
	netnstest.Require(t, "getent", "go", "nsenter", "unshare", "mount")
	bin := faultBuild(t)
	for _, kind := range []struct {
		name   string
		points []string
	}{
		{"bind-mounted", []string{
			"dns-changes.json-renamed",  // the original recorded, nothing changed yet
			"resolv.conf-overwritten",   // ours written over the original, not yet cut to length
			"resolv.conf-truncated",     // ours in place
			"resolv.conf-overwritten@2", // on disconnect: the original over ours, not yet cut
			"resolv.conf-truncated@2",   // the original back, the record not yet dropped
			"dns-restored",
		}},
		{"plain file", []string{
			"dns-changes.json-renamed",
			"resolv.conf-temp",      // ours in a temporary file, not yet renamed
			"resolv.conf-renamed",   // ours in place, the directory not yet synced
			"resolv.conf-temp@2",    // on disconnect: the original in a temporary file
			"resolv.conf-renamed@2", // the original back
			"dns-restored",
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			l := newLab(t)
			l.bin, l.real = bin, true
			f := newResolvFile(t, l, kind.name == "plain file")
			dnsServer(t, l.ctl, "10.0.0.2:53", map[string]string{"www.example.test": "192.0.2.80", "ky3.rjwrn.example.com": "198.51.100.21"})
			dnsServer(t, l.servers["ky3/n1"].NS, "100.100.1.1:53", map[string]string{"ky3.rjwrn.example.com": "100.100.1.1"})
			signedIn := false
			for _, point := range kind.points {
				f.checkFault(t, point, &signedIn)
			}
		})
	}
}

// faultBuild builds runos with the runosfault tag.
func faultBuild(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "runos")
	if out, err := exec.Command("go", "build", "-tags", "runosfault", "-o", bin, "../cmd/runos").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags runosfault: %v\n%s", err, out)
	}
	return bin
}

const faultOriginal = "# the LAN's resolver, with no newline at the end\nsearch lab.example\nnameserver 10.0.0.2\noptions timeout:1 attempts:2"

// resolvFile is the laptop's /etc/resolv.conf, read and written the way the
// laptop sees it.
type resolvFile struct {
	l     *lab
	plain bool
	host  string // bind-mounted: its path from the host
}

// newResolvFile gives the laptop its resolv.conf: bind-mounted by `ip netns
// exec` from /etc/netns/<ns>/, or a plain file in an overlay on /etc in a
// persisted mount namespace of its own (nsenter enters it).
func newResolvFile(t *testing.T, l *lab, plain bool) *resolvFile {
	f := &resolvFile{l: l, plain: plain}
	if !plain {
		etc := filepath.Join("/etc/netns", l.laptop.Name)
		if err := os.MkdirAll(etc, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(etc) })
		f.host = filepath.Join(etc, "resolv.conf")
		if err := os.WriteFile(f.host, []byte(faultOriginal), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	d := t.TempDir()
	nsDir := filepath.Join(d, "ns")
	for _, sub := range []string{nsDir, filepath.Join(d, "up"), filepath.Join(d, "work")} {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, "mount", "--bind", nsDir, nsDir)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", nsDir).Run() })
	mustRun(t, "mount", "--make-private", nsDir)
	mnt := filepath.Join(nsDir, "laptop")
	if err := os.WriteFile(mnt, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("set -e\nmount -t overlay overlay -o lowerdir=/etc,upperdir=%s/up,workdir=%s/work /etc\n"+
		"rm -f /etc/resolv.conf\nprintf '%%s' \"$1\" > /etc/resolv.conf\n", d, d)
	mustRun(t, "unshare", "--mount="+mnt, "--propagation", "private", "sh", "-c", script, "sh", faultOriginal)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	l.mountNS = mnt
	return f
}

func mustRun(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// exec runs argv on the laptop (its network namespace, and its mount
// namespace for the plain file).
func (f *resolvFile) exec(argv ...string) (string, error) {
	full := f.l.inLaptop(argv...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, full[0], full[1:]...).CombinedOutput()
	return string(out), err
}

func (f *resolvFile) read(t *testing.T) string {
	t.Helper()
	if !f.plain {
		b, err := os.ReadFile(f.host)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	out, err := f.exec("cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatalf("read the laptop's resolv.conf: %v: %s", err, out)
	}
	return out
}

// isPlainFile checks the plain kind stayed plain: a regular file (not a
// mount point), as the rename path needs.
func (f *resolvFile) isPlainFile(t *testing.T) {
	t.Helper()
	if out, err := f.exec("findmnt", "-n", "/etc/resolv.conf"); err == nil {
		t.Fatalf("the laptop's /etc/resolv.conf is a mount point here: %s", out)
	}
}

func (f *resolvFile) lookup(name string) string {
	out, err := f.exec("getent", "ahostsv4", name)
	if err != nil {
		return "(not found)"
	}
	return strings.Fields(out)[0]
}

func (f *resolvFile) expect(t *testing.T, when string, want map[string]string) {
	t.Helper()
	for name, addr := range want {
		if got := f.lookup(name); got != addr {
			t.Errorf("%s: %s → %s, want %s\nresolv.conf:\n%s", when, name, got, addr, f.read(t))
		}
	}
}

// cleanup runs `runos vpnd --cleanup` on the laptop.
func (f *resolvFile) cleanup(t *testing.T) {
	t.Helper()
	l := f.l
	out, err := f.exec(l.bin, "vpnd", "--cleanup", "--state-dir", l.stateDir, "--socket", l.socket, "--interface", l.iface)
	if err != nil {
		t.Fatalf("runos vpnd --cleanup: %v\n%s", err, out)
	}
}

// checkFault runs one round: a daemon that stops at point during connect or
// disconnect of ky3, then --cleanup, then a restart, then down.
func (f *resolvFile) checkFault(t *testing.T, point string, signedIn *bool) {
	t.Helper()
	l := f.l
	ctx := context.Background()
	if f.plain {
		f.isPlainFile(t)
	}
	if got := f.read(t); got != faultOriginal {
		t.Fatalf("%s: the round starts with resolv.conf\n%q", point, got)
	}
	l.env = []string{"RUNOS_FAULT=" + point}
	l.start()
	if !*signedIn {
		l.signIn(t)
		*signedIn = true
	}
	// Connect (pointing resolv.conf at the forwarder) and disconnect
	// (putting the original back): the point is on one of the two paths.
	// Either call may fail as the daemon dies under it.
	_, cerr := l.client.Connect(ctx, "ky3")
	if cerr == nil {
		l.waitStatusOrExit("ky3 up", peerUp("ky3"))
		_, _ = l.client.Disconnect(ctx, "ky3")
	}
	code := l.waitExit(15 * time.Second)
	if code != fault.ExitCode {
		t.Fatalf("%s: the daemon did not stop at the point (exit %d)\n%s", point, code, l.lastOutput)
	}
	if !strings.Contains(l.lastOutput, "fault: stopped dead at "+point) {
		t.Fatalf("%s: no fault line in the daemon's output\n%s", point, l.lastOutput)
	}
	t.Logf("%s: stopped dead there; resolv.conf left as:\n%s", point, f.read(t))

	f.cleanup(t)
	if got := f.read(t); got != faultOriginal {
		t.Fatalf("%s: after --cleanup resolv.conf is\n%q\nwant the original\n%q", point, got, faultOriginal)
	}
	f.expect(t, point+", after --cleanup", map[string]string{"www.example.test": "192.0.2.80", "app.ky3.rjwrn.example.com": "198.51.100.21"})

	// A restart: it reconnects ky3 if the stop came before the disconnect
	// was saved, and then the file must be the daemon's valid configuration.
	l.env = nil
	l.start()
	st, err := l.client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cluster(*st, "ky3").Wanted {
		l.waitStatus("ky3 back", peerUp("ky3"))
		if got := f.read(t); !strings.HasPrefix(got, "# Generated by runos vpnd") || !strings.Contains(got, "nameserver 127.0.80.53\n") {
			t.Fatalf("%s: after the restart, connected, resolv.conf is\n%s", point, got)
		}
		f.expect(t, point+", restarted and connected", map[string]string{"www.example.test": "192.0.2.80", "app.ky3.rjwrn.example.com": "100.100.1.1"})
		if _, err := l.client.Disconnect(ctx, "ky3"); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.read(t); got != faultOriginal {
		t.Fatalf("%s: disconnected after the restart, resolv.conf is\n%q", point, got)
	}
	f.expect(t, point+", restarted", map[string]string{"www.example.test": "192.0.2.80", "app.ky3.rjwrn.example.com": "198.51.100.21"})
	l.stop()
	if b, err := os.ReadFile(filepath.Join(l.stateDir, "dns-changes.json")); err == nil {
		t.Fatalf("%s: still recorded after a clean stop:\n%s", point, b)
	}
}

// waitStatusOrExit is waitStatus for a daemon that may stop dead meanwhile:
// it returns when cond holds or the daemon is gone.
func (l *lab) waitStatusOrExit(what string, cond func(*localapi.Status) bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := l.d.done
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := l.client.Watch(ctx, func(st *localapi.Status) bool { return !cond(st) })
	if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		l.t.Logf("waiting for %s: %v", what, err)
	}
}

// waitExit waits for the daemon to exit and returns its exit status (-1 if
// it is still running after timeout: then it is stopped).
func (l *lab) waitExit(timeout time.Duration) int {
	p := l.d
	l.lastOutput = ""
	select {
	case <-p.done:
	case <-time.After(timeout):
		l.lastOutput = l.output()
		l.stop()
		return -1
	}
	l.lastOutput = l.output()
	l.d = nil
	return p.cmd.ProcessState.ExitCode()
}
