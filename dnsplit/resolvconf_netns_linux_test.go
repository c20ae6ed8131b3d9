package dnsplit

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/resolvedtest"
)

// nsWorld is a laptop namespace joined to a "network" namespace that holds
// the user's resolver (10.201.0.53, with the clusters' public records) and
// two cluster DNS servers (10.201.0.1 for ky3, 10.201.0.2 for xym) reached
// over the link standing in for the tunnel.
type nsWorld struct {
	client, net *netnstest.NS
	ky3, xym    Route
}

const (
	ky3Domain = "ky3.rjwrn.example.com"
	xymDomain = "xym.rjwrn.example.com"
)

func newNSWorld(t *testing.T) *nsWorld {
	t.Helper()
	netnstest.Require(t, "ip", "unshare", "nsenter", "getent")
	w := &nsWorld{client: netnstest.New(t, "dc"), net: netnstest.New(t, "dn")}
	netnstest.Link(t, w.client, "tun0", "10.201.0.100/24", w.net, "eth0", "10.201.0.1/24")
	w.net.MustExec("ip", "addr", "add", "10.201.0.2/24", "dev", "eth0")
	w.net.MustExec("ip", "addr", "add", "10.201.0.53/24", "dev", "eth0")
	dnsIn(t, w.net.Name, "10.201.0.53", serverBehaviour{bySuffix: map[string]netip.Addr{
		"www.example.test": netip.MustParseAddr("198.51.100.80"),
		ky3Domain:          netip.MustParseAddr("198.51.100.21"),
		xymDomain:          netip.MustParseAddr("198.51.100.31"),
	}})
	dnsIn(t, w.net.Name, "10.201.0.1", serverBehaviour{answer: netip.MustParseAddr("100.100.1.1"), only: ky3Domain})
	dnsIn(t, w.net.Name, "10.201.0.2", serverBehaviour{answer: netip.MustParseAddr("100.100.2.1"), only: xymDomain})
	w.ky3 = Route{CID: "ky3", Server: netip.MustParseAddr("10.201.0.1"), Domains: []string{ky3Domain}}
	w.xym = Route{CID: "xym", Server: netip.MustParseAddr("10.201.0.2"), Domains: []string{xymDomain}}
	return w
}

// The laptop's resolv.conf before the VPN; timeout:1 attempts:1 so that a
// lookup against a dead forwarder fails fast.
const laptopResolvConf = "# the LAN's resolver\nsearch lab.example\nnameserver 10.201.0.53\noptions ndots:1 timeout:1 attempts:1\n"

// lookup resolves name through glibc (getent) in the holder's namespaces.
func lookup(t *testing.T, h *holder, name string) string {
	t.Helper()
	out, err := h.inHolder("getent", "ahostsv4", name)
	if err != nil {
		return "(not found)"
	}
	return strings.Fields(out)[0]
}

func expectLookups(t *testing.T, h *holder, when string, want map[string]string) {
	t.Helper()
	for name, addr := range want {
		if got := lookup(t, h, name); got != addr {
			t.Errorf("%s: %s resolves to %s, want %s", when, name, got, addr)
		}
	}
}

func checkPointsAtForwarder(t *testing.T, b []byte) {
	t.Helper()
	rc := parseResolvConf(b)
	if len(rc.nameservers) != 1 || rc.nameservers[0] != DefaultListenAddr.Addr() ||
		!bytes.Contains(b, []byte("\nsearch lab.example\n")) || !bytes.Contains(b, []byte("\noptions ndots:1 timeout:1 attempts:1\n")) {
		t.Fatalf("resolv.conf does not point at the forwarder with search and options kept:\n%s", b)
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestResolvConfModeInNamespace: a laptop whose /etc is its own (an overlay
// in a private mount namespace), so resolv.conf is replaced by rename.
func TestResolvConfModeInNamespace(t *testing.T) {
	w := newNSWorld(t)
	dir := t.TempDir()
	for _, d := range []string{"up", "work"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The overlay's upper layer is where the laptop's changed /etc files
	// land, so the test reads them there.
	file := filepath.Join(dir, "up", "resolv.conf")
	if err := os.WriteFile(file, []byte(laptopResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	h := startHolder(t, w.client, "RUNOS_DNSPLIT_OVERLAY="+dir, "RUNOS_DNSPLIT_STATE="+state, "RUNOS_DNSPLIT_IFACE=tun0")
	if st := h.status(); st.Mode != ModeResolvConf || !strings.Contains(st.Reason, "lists 10.201.0.53") {
		t.Fatalf("status %+v", st)
	}
	public := map[string]string{"app.ky3.rjwrn.example.com": "198.51.100.21", "app.xym.rjwrn.example.com": "198.51.100.31", "www.example.test": "198.51.100.80"}
	expectLookups(t, h, "before connecting", public)

	ino := inode(t, file)
	h.must("set", []Route{w.ky3})
	b, _ := os.ReadFile(file)
	checkPointsAtForwarder(t, b)
	if inode(t, file) == ino {
		t.Error("resolv.conf rewritten in place although it could be replaced atomically")
	}
	expectLookups(t, h, "ky3 connected", map[string]string{
		"app.ky3.rjwrn.example.com": "100.100.1.1", "k8s.ky3.rjwrn.example.com": "100.100.1.1",
		"app.xym.rjwrn.example.com": "198.51.100.31", "www.example.test": "198.51.100.80",
		"app": "(not found)", // the search line is kept: app.lab.example is asked for, and does not exist
	})

	h.must("set", []Route{w.ky3, w.xym})
	expectLookups(t, h, "both connected", map[string]string{"app.ky3.rjwrn.example.com": "100.100.1.1", "app.xym.rjwrn.example.com": "100.100.2.1", "www.example.test": "198.51.100.80"})

	h.must("set", []Route{w.xym})
	expectLookups(t, h, "ky3 disconnected", map[string]string{"app.ky3.rjwrn.example.com": "198.51.100.21", "app.xym.rjwrn.example.com": "100.100.2.1"})

	h.must("set", []Route{})
	if got, _ := os.ReadFile(file); string(got) != laptopResolvConf {
		t.Errorf("after disconnecting everything:\n%q\nwant byte for byte\n%q", got, laptopResolvConf)
	}
	expectLookups(t, h, "after disconnecting", public)

	// A program that rewrites the file by rename while connected: noticed,
	// re-applied, and its nameservers are the ones forwarded to.
	h.must("set", []Route{w.ky3})
	if out, err := h.inHolder("sh", "-c", "printf 'nameserver 10.201.0.53\\n# renewed\\n' > /etc/resolv.conf.new && mv /etc/resolv.conf.new /etc/resolv.conf"); err != nil {
		t.Fatal(out, err)
	}
	waitFor(t, "re-apply after a rename", func() bool { b, _ := os.ReadFile(file); return isOurResolvConf(b) })
	expectLookups(t, h, "after re-apply", map[string]string{"app.ky3.rjwrn.example.com": "100.100.1.1", "www.example.test": "198.51.100.80"})
	h.must("close", nil)
	if got, _ := os.ReadFile(file); string(got) != "nameserver 10.201.0.53\n# renewed\n" {
		t.Errorf("after close: %q, want the renewed file", got)
	}
}

func TestResolvConfModeOnABindMount(t *testing.T) {
	w := newNSWorld(t)
	file := resolvedtest.BindMountedResolvConf(t, w.client, laptopResolvConf)
	state := filepath.Join(t.TempDir(), "state")
	h := startHolder(t, w.client, "RUNOS_DNSPLIT_STATE="+state, "RUNOS_DNSPLIT_IFACE=tun0")
	ino := inode(t, file)

	h.must("set", []Route{w.ky3})
	b, _ := os.ReadFile(file)
	checkPointsAtForwarder(t, b)
	if inode(t, file) != ino {
		t.Error("the bind-mounted file was replaced, not rewritten in place")
	}
	expectLookups(t, h, "ky3 connected", map[string]string{"app.ky3.rjwrn.example.com": "100.100.1.1", "www.example.test": "198.51.100.80"})
	h.must("set", []Route{})
	if got, _ := os.ReadFile(file); string(got) != laptopResolvConf {
		t.Errorf("after disconnect:\n%q\nwant byte for byte\n%q", got, laptopResolvConf)
	}

	// Another program keeps writing the file in place (through the host's
	// path, so only the inode watch can see it): re-applied a bounded
	// number of times, then left alone and reported.
	h.must("set", []Route{w.ky3})
	for i := 0; i <= maxReapply; i++ {
		theirs := fmt.Sprintf("nameserver 10.201.0.53\n# rewrite %d\n", i)
		if err := os.WriteFile(file, []byte(theirs), 0o644); err != nil {
			t.Fatal(err)
		}
		if i < maxReapply {
			waitFor(t, fmt.Sprintf("re-apply %d", i+1), func() bool { b, _ := os.ReadFile(file); return isOurResolvConf(b) })
		}
	}
	waitFor(t, "giving up", func() bool {
		return strings.Contains(h.status().Error, "another program keeps rewriting /etc/resolv.conf")
	})
	h.must("close", nil)
	if got, _ := os.ReadFile(file); string(got) != fmt.Sprintf("nameserver 10.201.0.53\n# rewrite %d\n", maxReapply) {
		t.Errorf("after giving up and closing: %q, want the other program's last version", got)
	}
}

func TestResolvConfModeCrashThenCleanup(t *testing.T) {
	w := newNSWorld(t)
	file := resolvedtest.BindMountedResolvConf(t, w.client, laptopResolvConf)
	state := filepath.Join(t.TempDir(), "state")
	env := []string{"RUNOS_DNSPLIT_STATE=" + state, "RUNOS_DNSPLIT_IFACE=tun0"}

	h := startHolder(t, w.client, env...)
	h.must("set", []Route{w.ky3})
	h.kill9()
	b, _ := os.ReadFile(file)
	checkPointsAtForwarder(t, b)
	if _, err := w.client.Exec("getent", "ahostsv4", "www.example.test"); err == nil {
		t.Fatal("names resolve with the forwarder dead: the crash did not leave the change behind, so this test proves nothing")
	}
	// `runos vpnd --cleanup` (or the service's stop hook).
	runCleanup(t, w.client, state)
	if got, _ := os.ReadFile(file); string(got) != laptopResolvConf {
		t.Fatalf("after cleanup:\n%q\nwant byte for byte\n%q", got, laptopResolvConf)
	}
	if out, err := w.client.Exec("getent", "ahostsv4", "www.example.test"); err != nil || !strings.HasPrefix(out, "198.51.100.80") {
		t.Errorf("after cleanup www.example.test: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(state, journalFile)); !os.IsNotExist(err) {
		t.Error("journal left after cleanup")
	}

	// Crash again, and this time just start afresh: New cleans up first,
	// then connects on top of the real original, not on the stale file.
	h = startHolder(t, w.client, env...)
	h.must("set", []Route{w.ky3})
	h.kill9()
	h = startHolder(t, w.client, env...)
	if got, _ := os.ReadFile(file); string(got) != laptopResolvConf {
		t.Fatalf("a fresh start did not restore the original: %q", got)
	}
	h.must("set", []Route{w.ky3})
	expectLookups(t, h, "reconnected after a crash", map[string]string{"app.ky3.rjwrn.example.com": "100.100.1.1", "www.example.test": "198.51.100.80"})
	h.must("close", nil)
	if got, _ := os.ReadFile(file); string(got) != laptopResolvConf {
		t.Errorf("after close: %q", got)
	}
}
