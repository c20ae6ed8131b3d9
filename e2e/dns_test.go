//go:build !windows

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/localapi"
)

// getent is what the laptop's resolver (glibc through /etc/resolv.conf)
// answers for a name: the first address, or "" when it does not resolve.
func (w *world) getent(host, name string) string {
	out, err := w.run(host, nil, "getent", "ahostsv4", name)
	if err != nil {
		return ""
	}
	if f := strings.Fields(out); len(f) > 0 {
		return f[0]
	}
	return ""
}

// TestSplitDNS is issue 4 in the lab: the laptop's resolv.conf points at
// the LAN resolver, which knows the clusters' public records; a connected
// cluster's names resolve to its private VPN address, everything else as
// before, and the file is restored byte for byte, also after kill -9.
func TestSplitDNS(t *testing.T) {
	w := newWorld(t, 1, 0)
	netnstest.Require(t, "getent")
	laptop := w.env.Client.Host
	resolv := filepath.Join(w.env.Dir, "hosts", laptop, "resolv.conf")
	original, err := os.ReadFile(resolv)
	if err != nil {
		t.Fatal(err)
	}
	if st := w.status(laptop); st.DNS.Mode == "" || st.DNS.Mode == "off" {
		t.Fatalf("the lab's daemon runs with split DNS off (dns.mode %q: %s)", st.DNS.Mode, st.DNS.Reason)
	}
	app3, app9 := "app.ky3.rjwrn.example.com", "app.xym.rjwrn.example.com"
	expect := func(stage, name, want string) {
		t.Helper()
		w.waitFor(5*time.Second, stage+": "+name+" → "+want, func() bool { return w.getent(laptop, name) == want })
	}
	expect("before connecting", app3, "198.51.100.21")
	expect("before connecting", "www.example.test", "192.0.2.80")

	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("", "ky3"))
	c3, _ := cluster(st, "ky3")
	if c3.DNS.Server == "" || len(c3.DNS.Domains) == 0 {
		t.Errorf("ky3 dns in status: %+v", c3.DNS)
	}
	expect("ky3 connected", app3, c3.Server.Address)
	expect("ky3 connected", "k8s.ky3.rjwrn.example.com", c3.Server.Address)
	expect("ky3 connected", "www.example.test", "192.0.2.80")
	expect("ky3 connected, xym not", app9, "198.51.100.31")

	w.must(laptop, nil, "runos", "vpn", "connect", "xym")
	st = w.waitStatus(laptop, 30*time.Second, "connected to xym", upOn("", "ky3", "xym"))
	cx, _ := cluster(st, "xym")
	expect("xym connected", app9, cx.Server.Address)

	w.must(laptop, nil, "runos", "vpn", "disconnect", "ky3")
	expect("ky3 disconnected", app3, "198.51.100.21")
	expect("ky3 disconnected", app9, cx.Server.Address)

	w.must(laptop, nil, "runos", "vpn", "down")
	w.waitFor(5*time.Second, "resolv.conf restored byte for byte after vpn down", func() bool {
		b, _ := os.ReadFile(resolv)
		return string(b) == string(original)
	})

	// kill -9 while connected, then a fresh start: resolving still works.
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.waitStatus(laptop, 30*time.Second, "connected to ky3 again", upOn("", "ky3"))
	expect("connected again", app3, c3.Server.Address)
	if err := w.lab.Stop(laptop, "vpnd", syscall.SIGKILL, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := w.lab.Restart(t.Context(), laptop, "vpnd"); err != nil {
		t.Fatal(err)
	}
	w.waitStatus(laptop, 30*time.Second, "reconnected after kill -9", func(s *localapi.Status) bool {
		return upOn("", "ky3")(s)
	})
	expect("after kill -9 and a restart", "www.example.test", "192.0.2.80")
	expect("after kill -9 and a restart", app3, c3.Server.Address)

	// kill -9 again; --cleanup alone, as the docs give it (no flags: the
	// lab's environment names the state directory, where the daemon
	// recorded its change, as a laptop's default does), restores it.
	if err := w.lab.Stop(laptop, "vpnd", syscall.SIGKILL, time.Second); err != nil {
		t.Fatal(err)
	}
	w.must(laptop, nil, "runos", "vpnd", "--cleanup")
	if b, _ := os.ReadFile(resolv); string(b) != string(original) {
		t.Errorf("after kill -9 and --cleanup resolv.conf is:\n%s\nwant:\n%s", b, original)
	}
	expect("after --cleanup", "www.example.test", "192.0.2.80")
	expect("after --cleanup", app3, "198.51.100.21")
}
