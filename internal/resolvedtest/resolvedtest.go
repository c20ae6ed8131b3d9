//go:build linux

// Package resolvedtest runs a real systemd-resolved for root tests: on a
// private system-type dbus-daemon of the test's own, inside a test network
// namespace whose resolv.conf is resolved's stub file, with resolvectl to
// set and read its per-link settings. dnsplit's tests (the configurator
// against resolved) and vpnd's (the whole daemon against resolved) share
// it. Everything it starts or writes is removed when the test ends, also
// when it fails.
package resolvedtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/runos/vpn/internal/netnstest"
)

// Binary is Debian's systemd-resolved.
const Binary = "/lib/systemd/systemd-resolved"

// Commands are what a test of this package needs on PATH (or at that
// path): pass them to netnstest.Require.
var Commands = []string{"dbus-daemon", "resolvectl", "unshare", Binary}

// StubResolvConf is resolved's stub-resolv.conf, which /etc/resolv.conf is
// (or links to) where resolved manages DNS, as on Ubuntu: glibc asks the
// stub 127.0.0.53, and resolved itself takes no servers from the file.
const StubResolvConf = "# This is /run/systemd/resolve/stub-resolv.conf managed by man:systemd-resolved(8).\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n"

// Wait is how long a condition may take to come true: generous, for a
// machine whose CPUs a long CI run may be using.
const Wait = 60 * time.Second

// WaitFor polls cond until it holds, failing t after Wait.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(Wait); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Wait, what)
		}
	}
}

type logWriter struct {
	t      testing.TB
	prefix string
}

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// PrivateSystemBus runs a dbus-daemon of the system type on a socket of
// the test's own and returns its address, so the test's systemd-resolved
// owns org.freedesktop.resolve1 there and never meets another test's (or
// the machine's) on the real system bus. Clients reach it through
// DBUS_SYSTEM_BUS_ADDRESS, exactly as they reach the real one.
func PrivateSystemBus(t testing.TB) string {
	t.Helper()
	// Not t.TempDir (0700): resolved drops to its own user before it
	// connects, and must reach the socket.
	dir, err := os.MkdirTemp("", "runos-resolvedtest-bus-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "system_bus_socket")
	conf := filepath.Join(dir, "bus.conf")
	// The policy a root daemon meets on a stock system bus, made simple:
	// resolved (as systemd-resolve) may own its name, root may call it.
	err = os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=`+sock+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_type="*"/>
  </policy>
</busconfig>
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--nopidfile")
	cmd.Stderr = logWriter{t, "dbus-daemon: "}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	WaitFor(t, "the bus socket", func() bool { _, err := os.Stat(sock); return err == nil })
	return "unix:path=" + sock
}

// BindMountedResolvConf writes content to /etc/netns/<ns>/resolv.conf,
// which `ip netns exec` mounts over /etc/resolv.conf for every command it
// runs in ns (so for resolved, the daemon and getent there), and removes
// the directory when the test ends. Write it before starting anything that
// reads /etc/resolv.conf in ns. It returns the file's path.
func BindMountedResolvConf(t testing.TB, ns *netnstest.NS, content string) string {
	t.Helper()
	dir := filepath.Join("/etc/netns", ns.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Resolved is a systemd-resolved running in a test's namespace.
type Resolved struct {
	NS  *netnstest.NS
	Bus string    // its system bus's address
	Cmd *exec.Cmd // its process (ip netns exec, unshare and sh exec in place, so the PID is resolved's)
}

// Start runs systemd-resolved in ns on the bus at bus and waits until it
// owns org.freedesktop.resolve1. It keeps its runtime files in
// /run/systemd/resolve: a tmpfs in its own mount namespace keeps them off
// the host's /run. It is killed when the test ends.
func Start(t testing.TB, ns *netnstest.NS, bus string) *Resolved {
	t.Helper()
	r := &Resolved{NS: ns, Bus: bus}
	r.Cmd = ns.Start([]string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus}, "unshare", "-m", "--propagation", "private",
		"sh", "-c", "mount -t tmpfs tmpfs /run/systemd && exec "+Binary)
	WaitFor(t, "systemd-resolved on the bus", r.answers)
	return r
}

// answers reports whether resolved answers a ping on its bus.
func (r *Resolved) answers() bool {
	conn, err := dbus.Connect(r.Bus)
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return conn.Object("org.freedesktop.resolve1", "/org/freedesktop/resolve1").
		CallWithContext(ctx, "org.freedesktop.DBus.Peer.Ping", 0).Err == nil
}

// Stop ends resolved with SIGTERM (as an upgrade restarts it) and waits
// until it has gone.
func (r *Resolved) Stop(t testing.TB) {
	t.Helper()
	if err := r.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, "systemd-resolved to stop", func() bool { return syscall.Kill(r.Cmd.Process.Pid, 0) != nil })
}

// Resolvectl runs resolvectl in resolved's namespace against its bus and
// returns the output.
func (r *Resolved) Resolvectl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	cmd := r.NS.Command(ctx, "resolvectl", args...)
	cmd.Env = append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+r.Bus)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("resolvectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// linkValue is the part after "Link N (iface):" of a one-link resolvectl
// answer, such as `resolvectl dns iface`.
func (r *Resolved) linkValue(t testing.TB, args ...string) string {
	t.Helper()
	out := strings.TrimSpace(r.Resolvectl(t, args...))
	_, v, ok := strings.Cut(out, "):")
	if !ok {
		t.Fatalf("resolvectl %s: unexpected output %q", strings.Join(args, " "), out)
	}
	return strings.TrimSpace(v)
}

// LinkDNS is what resolved holds as the link's DNS servers
// (`resolvectl dns iface`), space-separated; "" for none.
func (r *Resolved) LinkDNS(t testing.TB, iface string) string {
	t.Helper()
	return r.linkValue(t, "dns", iface)
}

// LinkDomains is the link's domains (`resolvectl domain iface`),
// routing-only ones with their "~"; "" for none.
func (r *Resolved) LinkDomains(t testing.TB, iface string) string {
	t.Helper()
	return r.linkValue(t, "domain", iface)
}

// LinkDefaultRoute is `resolvectl default-route iface`: "yes" or "no".
func (r *Resolved) LinkDefaultRoute(t testing.TB, iface string) string {
	t.Helper()
	return r.linkValue(t, "default-route", iface)
}

// SetLink gives a link DNS servers and domains as NetworkManager or
// networkd would ("~." routes every name there): the "before" of a test.
// Resolved forgets them when it restarts; set them again then.
func (r *Resolved) SetLink(t testing.TB, iface string, servers []string, domains []string) {
	t.Helper()
	r.Resolvectl(t, append([]string{"dns", iface}, servers...)...)
	r.Resolvectl(t, append([]string{"domain", iface}, domains...)...)
	if got := r.LinkDNS(t, iface); got != strings.Join(servers, " ") {
		t.Fatalf("%s's DNS in resolved = %q after setting %v", iface, got, servers)
	}
}
