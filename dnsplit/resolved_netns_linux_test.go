package dnsplit

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/resolvedtest"
)

// resolvedWorld: a laptop namespace whose DNS is managed by a real
// systemd-resolved (resolv.conf → its stub), with a LAN link whose server
// answers everything "as before", and a tunnel stand-in link (tun0) behind
// which two cluster DNS servers answer their own names and refuse others,
// like the gateway's cluster DNS.
type resolvedWorld struct {
	client, net   *netnstest.NS
	bus           string
	lan, ky3, xym *testServer
	ky3r, xymr    Route
	stateDir      string
	resolved      *resolvedtest.Resolved
}

func newResolvedWorld(t *testing.T) *resolvedWorld {
	t.Helper()
	netnstest.Require(t, append([]string{"ip", "nsenter", "getent"}, resolvedtest.Commands...)...)
	w := &resolvedWorld{client: netnstest.New(t, "drc"), net: netnstest.New(t, "drn"), stateDir: filepath.Join(t.TempDir(), "state")}
	netnstest.Link(t, w.client, "tun0", "10.205.0.100/24", w.net, "eth0", "10.205.0.1/24")
	netnstest.Link(t, w.client, "lan0", "10.206.0.100/24", w.net, "eth1", "10.206.0.53/24")
	w.net.MustExec("ip", "addr", "add", "10.205.0.2/24", "dev", "eth0")
	w.lan = dnsIn(t, w.net.Name, "10.206.0.53", serverBehaviour{bySuffix: map[string]netip.Addr{
		"www.example.test": netip.MustParseAddr("198.51.100.80"),
		ky3Domain:          netip.MustParseAddr("198.51.100.21"),
		xymDomain:          netip.MustParseAddr("198.51.100.31"),
	}})
	w.ky3 = dnsIn(t, w.net.Name, "10.205.0.1", serverBehaviour{answer: netip.MustParseAddr("100.100.1.1"), only: ky3Domain})
	w.xym = dnsIn(t, w.net.Name, "10.205.0.2", serverBehaviour{answer: netip.MustParseAddr("100.100.2.1"), only: xymDomain})
	w.ky3r = Route{CID: "ky3", Server: netip.MustParseAddr("10.205.0.1"), Domains: []string{ky3Domain}}
	w.xymr = Route{CID: "xym", Server: netip.MustParseAddr("10.205.0.2"), Domains: []string{xymDomain}}

	// resolv.conf in the laptop namespace is resolved's stub file (as on
	// Ubuntu); resolved itself then takes no servers from it.
	resolvedtest.BindMountedResolvConf(t, w.client, resolvedtest.StubResolvConf)

	w.bus = resolvedtest.PrivateSystemBus(t)
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", w.bus)
	w.startResolved(t)

	return w
}

// startResolved runs systemd-resolved in the laptop namespace (see
// resolvedtest.Start) and gives the LAN link the user's resolver.
func (w *resolvedWorld) startResolved(t *testing.T) {
	t.Helper()
	w.resolved = resolvedtest.Start(t, w.client, w.bus)
	// "Before": the LAN link carries the user's resolver for everything
	// (~.), as NetworkManager or networkd would set it, again after every
	// restart of resolved.
	w.resolved.SetLink(t, "lan0", []string{"10.206.0.53"}, []string{"~."})
}

// stubQuery asks systemd-resolved's stub 127.0.0.53 in the laptop namespace.
func (w *resolvedWorld) stubQuery(t *testing.T, name string) string {
	t.Helper()
	var r *dns.Msg
	var err error
	inNetns(t, w.client.Name, func() {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		c := &dns.Client{Timeout: 10 * time.Second}
		r, _, err = c.Exchange(m, "127.0.0.53:53")
	})
	if err != nil {
		t.Fatalf("query %s through the stub: %v", name, err)
	}
	if a := firstA(r); a != "" {
		return a
	}
	return dns.RcodeToString[r.Rcode]
}

// linkDNS is what resolved holds for tun0 (`resolvectl dns tun0`).
func (w *resolvedWorld) linkDNS(t *testing.T) string {
	t.Helper()
	return w.resolved.LinkDNS(t, "tun0")
}

func (w *resolvedWorld) holder(t *testing.T) *holder {
	return startHolder(t, w.client, "RUNOS_DNSPLIT_STATE="+w.stateDir, "RUNOS_DNSPLIT_IFACE=tun0", "DBUS_SYSTEM_BUS_ADDRESS="+w.bus)
}

func TestResolvedModeAgainstSystemdResolved(t *testing.T) {
	w := newResolvedWorld(t)
	h := w.holder(t)
	st := h.status()
	if st.Mode != ModeResolved || !strings.Contains(st.Reason, "systemd-resolved manages DNS") {
		t.Fatalf("mode chosen: %+v", st)
	}
	before := map[string]string{"app.ky3.rjwrn.example.com": "198.51.100.21", "app.xym.rjwrn.example.com": "198.51.100.31", "www.example.test": "198.51.100.80"}
	check := func(when string, want map[string]string) {
		t.Helper()
		for name, addr := range want {
			if got := w.stubQuery(t, name); got != addr {
				t.Errorf("%s: %s through the stub = %s, want %s", when, name, got, addr)
			}
		}
	}
	check("before connecting", before)

	h.must("set", []Route{w.ky3r})
	if got := w.linkDNS(t); got != "10.205.0.1" {
		t.Errorf("tun0's DNS in resolved = %q", got)
	}
	ky3Before, lanBefore := w.ky3.hits(), w.lan.hits()
	check("ky3 connected", map[string]string{"app.ky3.rjwrn.example.com": "100.100.1.1", "k8s.ky3.rjwrn.example.com": "100.100.1.1"})
	if w.ky3.hits() == ky3Before {
		t.Error("the cluster's DNS server was not asked")
	}
	if w.lan.hits() != lanBefore {
		t.Error("a cluster name leaked to the LAN resolver")
	}
	ky3Before = w.ky3.hits()
	check("ky3 connected", map[string]string{"www.example.test": "198.51.100.80", "app.xym.rjwrn.example.com": "198.51.100.31"})
	if w.ky3.hits() != ky3Before {
		t.Error("a name outside the cluster's domains went through the tunnel")
	}
	// Through glibc too, as every program on the laptop resolves.
	expectLookups(t, h, "ky3 connected (glibc)", map[string]string{"app.ky3.rjwrn.example.com": "100.100.1.1", "www.example.test": "198.51.100.80"})

	// Two clusters on one link: the link's one server is the splitter on
	// tun0's own address, and each cluster's server is asked for its own
	// names only (given both servers, resolved would ask either for
	// either's names and move on when refused).
	h.must("set", []Route{w.ky3r, w.xymr})
	if got := w.linkDNS(t); got != "10.205.0.100" {
		t.Errorf("tun0's DNS in resolved with two clusters = %q, want the splitter on 10.205.0.100", got)
	}
	ky3Asked, xymAsked := w.ky3.hits(), w.xym.hits()
	check("both connected", map[string]string{"a.ky3.rjwrn.example.com": "100.100.1.1", "a.xym.rjwrn.example.com": "100.100.2.1",
		"b.ky3.rjwrn.example.com": "100.100.1.1", "b.xym.rjwrn.example.com": "100.100.2.1", "www.example.test": "198.51.100.80"})
	if w.ky3.hits() == ky3Asked || w.xym.hits() == xymAsked {
		t.Error("a cluster's server was not asked for its names")
	}
	crossed := func() int64 { return w.ky3.refused.Load() + w.xym.refused.Load() }
	if n := crossed(); n != 0 {
		t.Errorf("%d names were sent to the other cluster's server", n)
	}
	expectLookups(t, h, "both connected (glibc)", map[string]string{"c.ky3.rjwrn.example.com": "100.100.1.1", "c.xym.rjwrn.example.com": "100.100.2.1"})

	// resolved restarts (an upgrade): it forgets the link; the
	// configurator notices the new owner of its bus name and sets it again.
	w.resolved.Stop(t)
	w.startResolved(t)
	waitFor(t, "tun0 configured again after the restart", func() bool { return w.linkDNS(t) == "10.205.0.100" })
	check("after resolved restarted", map[string]string{"a.ky3.rjwrn.example.com": "100.100.1.1", "a.xym.rjwrn.example.com": "100.100.2.1"})
	if n := crossed(); n != 0 {
		t.Errorf("%d names were sent to the other cluster's server", n)
	}

	// Back to one cluster: the link gets its server again.
	h.must("set", []Route{w.xymr})
	if got := w.linkDNS(t); got != "10.205.0.2" {
		t.Errorf("tun0's DNS with xym alone = %q", got)
	}
	check("xym alone", map[string]string{"d.xym.rjwrn.example.com": "100.100.2.1", "d.ky3.rjwrn.example.com": "198.51.100.21"})

	h.must("set", []Route{})
	if got := w.linkDNS(t); got != "" {
		t.Errorf("tun0 still has DNS %q after Set(nil)", got)
	}
	check("after disconnecting", before)

	h.must("set", []Route{w.ky3r})
	h.must("close", nil)
	if got := w.linkDNS(t); got != "" {
		t.Errorf("tun0 still has DNS %q after Close", got)
	}
	check("after close", before)
}

func TestResolvedModeCrashThenCleanup(t *testing.T) {
	w := newResolvedWorld(t)
	h := w.holder(t)
	h.must("set", []Route{w.ky3r})
	h.kill9()
	if got := w.linkDNS(t); got != "10.205.0.1" {
		t.Fatalf("after kill -9, tun0's DNS = %q: the crash left nothing to clean up, so this proves nothing", got)
	}
	runCleanup(t, w.client, w.stateDir)
	if got := w.linkDNS(t); got != "" {
		t.Errorf("after cleanup tun0 still has DNS %q", got)
	}
	if got := w.stubQuery(t, "app.ky3.rjwrn.example.com"); got != "198.51.100.21" {
		t.Errorf("after cleanup the cluster name resolves to %s, want the public answer", got)
	}
	if _, err := os.Stat(filepath.Join(w.stateDir, journalFile)); !os.IsNotExist(err) {
		t.Error("journal left after cleanup")
	}
}
