package dnsplit

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/runos/vpn/internal/atomicfile"
)

// fakeClock is a settable clock for the rewrite window.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// waitFor polls cond (a file the watcher reacts to, a status) until it
// holds; the deadline is generous because the machine is shared.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// newTestResolvConfMode fronts a resolv.conf in a temporary directory with a
// forwarder on a free loopback port: the whole resolv.conf mode without root.
func newTestResolvConfMode(t *testing.T, orig string, clock *fakeClock) (*resolvConfMode, Options) {
	t.Helper()
	dir := t.TempDir()
	opt := Options{
		Interface:  "wgtest",
		StateDir:   filepath.Join(dir, "state"),
		ResolvConf: filepath.Join(dir, "etc", "resolv.conf"),
		ListenAddr: freeLoopbackPort(t),
		Logger:     slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:        time.Now,
	}
	if clock != nil {
		opt.Now = clock.now
	}
	if err := os.MkdirAll(filepath.Dir(opt.ResolvConf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(opt.ResolvConf, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := opt.fill(); err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(opt.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	m := newResolvConfMode(opt, j, "test")
	t.Cleanup(func() { _ = m.Close() })
	return m, opt
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestResolvConfModeConnectDisconnect(t *testing.T) {
	orig := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("198.51.100.21")})
	cluster := startDNS(t, "127.0.0.2", serverBehaviour{answer: netip.MustParseAddr("100.100.1.1")})
	// The forwarder always asks port 53 upstream, so this test's servers
	// stand behind a table swap once the mode has built its own.
	before := fmt.Sprintf("search lab.example\nnameserver %s\noptions ndots:1\n", orig.addr.Addr())
	m, opt := newTestResolvConfMode(t, before, nil)

	routes := []Route{{CID: "ky3", Server: cluster.addr.Addr(), Domains: []string{"ky3.rjwrn.example.com"}}}
	if err := m.Set(context.Background(), routes); err != nil {
		t.Fatal(err)
	}
	now, _ := os.ReadFile(opt.ResolvConf)
	rc := parseResolvConf(now)
	if len(rc.nameservers) != 1 || rc.nameservers[0] != opt.ListenAddr.Addr() || !strings.Contains(string(now), "search lab.example\n") {
		t.Fatalf("resolv.conf while connected:\n%s", now)
	}
	j, _ := openJournal(opt.StateDir)
	if cs, _ := j.load(); len(cs) != 1 || string(cs[0].Original) != before {
		t.Fatalf("journal while connected: %+v", cs)
	}
	m.mu.Lock()
	m.fwd.setTable(tableWith(map[string]netip.AddrPort{"ky3.rjwrn.example.com": cluster.addr}, orig.addr))
	m.mu.Unlock()
	if r := ask(t, opt.ListenAddr, "udp", "app.ky3.rjwrn.example.com", dns.TypeA, 0); firstA(r) != "100.100.1.1" {
		t.Errorf("cluster name through the forwarder: %v", r)
	}
	if r := ask(t, opt.ListenAddr, "udp", "www.example.test", dns.TypeA, 0); firstA(r) != "198.51.100.21" {
		t.Errorf("public name through the forwarder: %v", r)
	}
	if st := m.Status(); st.Mode != ModeResolvConf || st.Error != "" {
		t.Errorf("status %+v", st)
	}

	// Set again with another cluster: the file is not rewritten.
	fi1, _ := os.Stat(opt.ResolvConf)
	routes = append(routes, Route{CID: "xym", Server: cluster.addr.Addr(), Domains: []string{"xym.rjwrn.example.com"}})
	if err := m.Set(context.Background(), routes); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(opt.ResolvConf); !os.SameFile(fi1, fi2) {
		t.Error("resolv.conf rewritten for a route change")
	}
	if _, ok := m.fwd.table.Load().route("a.xym.rjwrn.example.com."); !ok {
		t.Error("second cluster not routed")
	}

	if err := m.Set(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(opt.ResolvConf); string(got) != before {
		t.Errorf("after disconnect:\n%q\nwant byte for byte\n%q", got, before)
	}
	if _, err := os.Stat(filepath.Join(opt.StateDir, journalFile)); !os.IsNotExist(err) {
		t.Errorf("journal left after a clean disconnect: %v", err)
	}
	if _, err := net.Dial("tcp", opt.ListenAddr.String()); err == nil {
		t.Error("forwarder still listening after disconnect")
	}
}

func TestResolvConfModeRefusesBadRoutesChangingNothing(t *testing.T) {
	m, opt := newTestResolvConfMode(t, "nameserver 10.77.0.53\n", nil)
	err := m.Set(context.Background(), []Route{{CID: "ky3", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"../../etc"}}})
	if err == nil {
		t.Fatal("a domain with a path in it was accepted")
	}
	if got, _ := os.ReadFile(opt.ResolvConf); string(got) != "nameserver 10.77.0.53\n" {
		t.Errorf("resolv.conf changed by a refused Set: %q", got)
	}
	if _, err := os.Stat(filepath.Join(opt.StateDir, journalFile)); !os.IsNotExist(err) {
		t.Error("a refused Set left a record")
	}
}

func TestResolvConfModeListenFailureChangesNothing(t *testing.T) {
	m, opt := newTestResolvConfMode(t, "nameserver 10.77.0.53\n", nil)
	busy, err := net.ListenPacket("udp", opt.ListenAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	err = m.Set(context.Background(), []Route{{CID: "ky3", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"ky3.rjwrn.example.com"}}})
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Set with the port taken: %v", err)
	}
	if got, _ := os.ReadFile(opt.ResolvConf); string(got) != "nameserver 10.77.0.53\n" {
		t.Errorf("resolv.conf changed although the forwarder could not start: %q", got)
	}
	if _, err := os.Stat(filepath.Join(opt.StateDir, journalFile)); !os.IsNotExist(err) {
		t.Error("failed Set left a record")
	}
	if m.Status().Error == "" {
		t.Error("status does not report the failure")
	}
}

func TestResolvConfModeReappliesThenStopsFighting(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	m, opt := newTestResolvConfMode(t, "nameserver 10.77.0.53\n", clock)
	if err := m.Set(context.Background(), []Route{{CID: "ky3", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"ky3.rjwrn.example.com"}}}); err != nil {
		t.Fatal(err)
	}
	ours := func() bool { b, _ := os.ReadFile(opt.ResolvConf); return isOurResolvConf(b) }

	// A DHCP client renews with a new server, writing by rename; then
	// one writing in place. Each is noticed and re-applied, and the new
	// server becomes the forwarder's upstream and the file restored later.
	for i, write := range []func(p string, b []byte) error{
		func(p string, b []byte) error { return atomicfile.WriteFile(p, b, 0o644) },
		writeFileInPlace,
	} {
		theirs := fmt.Sprintf("# dhclient\nnameserver 10.77.0.%d\n", 60+i)
		if err := write(opt.ResolvConf, []byte(theirs)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "re-apply", func() bool {
			if !ours() {
				return false
			}
			ups := m.fwd.table.Load().upstreams
			return len(ups) == 1 && ups[0].String() == fmt.Sprintf("10.77.0.%d:53", 60+i)
		})
		clock.add(time.Second)
	}
	if st := m.Status(); st.Error != "" {
		t.Errorf("status after two re-applies: %q", st.Error)
	}
	// Well apart in time, rewrites are never "fighting".
	clock.add(reapplyWindow)
	// Now a program that rewrites over and over: re-applied maxReapply
	// times within the window, then left alone and reported.
	for i := 0; ; i++ {
		theirs := fmt.Sprintf("nameserver 10.77.1.%d\n", i)
		if err := atomicfile.WriteFile(opt.ResolvConf, []byte(theirs), 0o644); err != nil {
			t.Fatal(err)
		}
		if i == maxReapply {
			waitFor(t, "giving up", func() bool { return m.Status().Error != "" })
			break
		}
		waitFor(t, fmt.Sprintf("re-apply %d", i+1), ours)
		clock.add(time.Second)
	}
	st := m.Status()
	if !strings.Contains(st.Error, "another program keeps rewriting") {
		t.Errorf("status error = %q", st.Error)
	}
	// One more rewrite: the watcher sees it and checks (the count moves),
	// and the check leaves the other program's file alone.
	last := fmt.Sprintf("nameserver 10.77.1.%d\n", maxReapply+1)
	before := m.checks.Load()
	if err := atomicfile.WriteFile(opt.ResolvConf, []byte(last), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the check of a rewrite after giving up", func() bool { return m.checks.Load() > before })
	if got, _ := os.ReadFile(opt.ResolvConf); string(got) != last {
		t.Errorf("kept fighting after giving up: %q", got)
	}
	// Disconnecting leaves the other program's file alone and clears the error.
	if err := m.Set(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(opt.ResolvConf); string(got) != last {
		t.Errorf("disconnect clobbered the other program's file: %q", got)
	}
	if st := m.Status(); st.Error != "" {
		t.Errorf("error after disconnect: %q", st.Error)
	}
}

func TestResolvConfModeRestoresTheLatestForeignVersion(t *testing.T) {
	m, opt := newTestResolvConfMode(t, "nameserver 10.77.0.53\n", nil)
	if err := m.Set(context.Background(), []Route{{CID: "ky3", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"ky3.rjwrn.example.com"}}}); err != nil {
		t.Fatal(err)
	}
	renewed := []byte("search new.example\nnameserver 10.77.0.99\n")
	if err := atomicfile.WriteFile(opt.ResolvConf, renewed, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "re-apply", func() bool { b, _ := os.ReadFile(opt.ResolvConf); return isOurResolvConf(b) })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(opt.ResolvConf); !bytes.Equal(got, renewed) {
		t.Errorf("after disconnect %q, want the renewed file %q", got, renewed)
	}
}
