package vpnd

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/resolvedtest"
)

// TestDaemonSplitDNSResolved runs the real daemon (wireguard-go on a TUN
// device, the real dnsplit) in a laptop namespace whose DNS a real
// systemd-resolved manages: /etc/resolv.conf there is resolved's stub file,
// resolved runs in the same network namespace on a private system bus that
// the daemon reaches through DBUS_SYSTEM_BUS_ADDRESS, as it would reach the
// machine's, and the LAN link carries the user's resolver for every name.
// The daemon must pick the systemd-resolved mode by itself. Once a cluster
// is connected, its names asked through the stub 127.0.0.53 (by glibc)
// reach the cluster's DNS, which listens only on the VPN server's address
// inside the tunnel subnet and sees the queries come from the device's
// tunnel address: they went through WireGuard. Other names still go to
// the LAN's resolver, and never through the tunnel. The tunnel's link
// carries the clusters' servers and routing-only ~domains and is no
// default route; disconnecting reverts it, and stopping the daemon while
// connected leaves nothing behind.
func TestDaemonSplitDNSResolved(t *testing.T) {
	netnstest.Require(t, append([]string{"getent"}, resolvedtest.Commands...)...)
	l := newLab(t)

	const (
		ky3Domain, xymDomain = "ky3.rjwrn.example.com", "xym.rjwrn.example.com"
		ky3Public, xymPublic = "198.51.100.21", "198.51.100.31"
		ky3Private           = "100.100.1.1" // the VPN server's address in ky3's subnet, and its DNS
		xymPrivate           = "100.100.2.1"
		wwwAddr              = "192.0.2.80"
	)
	// The LAN's resolver (the user's router) answers everything, the
	// clusters' names with their public addresses; each cluster's DNS
	// answers on its node only at the VPN server's address, which exists
	// only on the node's WireGuard interface, and refuses other names.
	lan := dnsServer(t, l.ctl, "10.0.0.2:53", map[string]string{
		"www.example.test": wwwAddr, ky3Domain: ky3Public, xymDomain: xymPublic})
	ky3 := dnsServer(t, l.servers["ky3/n1"].NS, ky3Private+":53", map[string]string{ky3Domain: ky3Private})
	xym := dnsServer(t, l.servers["xym/n1"].NS, xymPrivate+":53", map[string]string{xymDomain: xymPrivate})

	// The laptop: resolv.conf is the stub (written before anything starts
	// in the namespace: `ip netns exec` mounts it over /etc/resolv.conf
	// for resolved, the daemon and every getent below), resolved runs
	// there, and the LAN link routes every name (~.) to the LAN's resolver.
	resolvedtest.BindMountedResolvConf(t, l.laptop, resolvedtest.StubResolvConf)
	bus := resolvedtest.PrivateSystemBus(t)
	res := resolvedtest.Start(t, l.laptop, bus)
	res.SetLink(t, "eth0", []string{"10.0.0.2"}, []string{"~."})

	lookup := func(name string) string {
		out, err := l.laptop.Exec("getent", "ahostsv4", name)
		if err != nil {
			return "(not found)"
		}
		return strings.Fields(out)[0]
	}
	expect := func(when string, want map[string]string) {
		t.Helper()
		for name, addr := range want {
			if got := lookup(name); got != addr {
				t.Errorf("%s: %s → %s, want %s", when, name, got, addr)
			}
		}
	}
	// eventually waits for a change to reach resolved's answers.
	eventually := func(when, name, want string) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(resolvedtest.Wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got = lookup(name); got == want {
				return
			}
		}
		t.Fatalf("%s: %s → %s, want %s (waited %v)", when, name, got, want, resolvedtest.Wait)
	}
	// link is what resolved holds for the tunnel's link: its servers and
	// its domains, each sorted.
	link := func() (servers, domains string) {
		s := strings.Fields(res.LinkDNS(t, l.iface))
		d := strings.Fields(res.LinkDomains(t, l.iface))
		slices.Sort(s)
		slices.Sort(d)
		return strings.Join(s, " "), strings.Join(d, " ")
	}
	waitLink := func(when, servers, domains string) {
		t.Helper()
		var s, d string
		for deadline := time.Now().Add(resolvedtest.Wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if s, d = link(); s == servers && d == domains {
				return
			}
		}
		t.Fatalf("%s: the tunnel's link %s in resolved has DNS %q and domains %q, want %q and %q", when, l.iface, s, d, servers, domains)
	}
	public := map[string]string{"app.ky3.rjwrn.example.com": ky3Public, "app.xym.rjwrn.example.com": xymPublic, "www.example.test": wwwAddr}
	expect("before the daemon", public)

	l.env = []string{"T_DNS=auto", "DBUS_SYSTEM_BUS_ADDRESS=" + bus}
	l.start()
	ctx := context.Background()
	st, err := l.client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DNS.Mode != dnsplit.ModeResolved || !strings.Contains(st.DNS.Reason, "systemd-resolved manages DNS") || st.DNS.Error != "" {
		t.Fatalf("the daemon chose DNS %+v, want mode %s", st.DNS, dnsplit.ModeResolved)
	}
	if s, d := link(); s != "" || d != "" {
		t.Errorf("the tunnel's link has DNS %q and domains %q before any connection", s, d)
	}
	expect("daemon started, nothing connected", public)

	// ky3 connected: its names go to its DNS through the tunnel, the rest
	// as before.
	l.signIn(t)
	lanKy3 := len(lan.asked(ky3Domain))
	if _, err := l.client.Connect(ctx, "ky3"); err != nil {
		t.Fatal(err)
	}
	st = l.waitStatus("ky3 up", peerUp("ky3"))
	if len(st.Tunnel.Addresses) != 1 {
		t.Fatalf("tunnel addresses %v", st.Tunnel.Addresses)
	}
	tunnelAddr := netip.MustParsePrefix(st.Tunnel.Addresses[0]).Addr()
	waitLink("ky3 connected", ky3Private, "~"+ky3Domain)
	if got := res.LinkDefaultRoute(t, l.iface); got != "no" {
		t.Errorf("ky3 connected: the tunnel's link is a default route for DNS (%q): other names could go through it", got)
	}
	t.Logf("resolvectl status %s:\n%s", l.iface, res.Resolvectl(t, "status", l.iface))
	eventually("ky3 connected", "app.ky3.rjwrn.example.com", ky3Private)
	expect("ky3 connected", map[string]string{"k8s.ky3.rjwrn.example.com": ky3Private,
		"app.xym.rjwrn.example.com": xymPublic, "www.example.test": wwwAddr})
	overTunnel := func(when string, s *dnsLog, domain string) {
		t.Helper()
		qs := s.asked(domain)
		if len(qs) == 0 {
			t.Errorf("%s: the cluster's DNS was never asked for a name under %s", when, domain)
		}
		for _, q := range qs {
			if q.from != tunnelAddr {
				t.Errorf("%s: the cluster's DNS was asked %s from %v, not from the device's tunnel address %v", when, q.name, q.from, tunnelAddr)
			}
		}
	}
	overTunnel("ky3 connected", ky3, ky3Domain)
	if n := len(lan.asked(ky3Domain)); n != lanKy3 {
		t.Errorf("ky3 connected: %d questions for ky3's names leaked to the LAN's resolver", n-lanKy3)
	}
	if qs := append(ky3.asked("example.test"), ky3.asked(xymDomain)...); len(qs) != 0 {
		t.Errorf("ky3 connected: names outside ky3's domain went to ky3's DNS: %v", qs)
	}

	// Both clusters on the one link: its one server is the daemon's
	// splitter on the device's tunnel address, which asks each cluster's
	// DNS for its own names only, through the tunnel.
	if _, err := l.client.Connect(ctx, "xym"); err != nil {
		t.Fatal(err)
	}
	l.waitStatus("xym up", peerUp("xym"))
	waitLink("both connected", tunnelAddr.String(), "~"+ky3Domain+" ~"+xymDomain)
	eventually("both connected", "app.xym.rjwrn.example.com", xymPrivate)
	expect("both connected", map[string]string{"app.ky3.rjwrn.example.com": ky3Private, "k8s.xym.rjwrn.example.com": xymPrivate, "www.example.test": wwwAddr})
	overTunnel("both connected", xym, xymDomain)
	overTunnel("both connected", ky3, ky3Domain)
	if qs := append(ky3.asked(xymDomain), xym.asked(ky3Domain)...); len(qs) != 0 {
		t.Errorf("both connected: a cluster's names went to the other cluster's DNS: %v", qs)
	}

	// ky3 disconnected: its names are public again, xym's still private.
	if _, err := l.client.Disconnect(ctx, "ky3"); err != nil {
		t.Fatal(err)
	}
	waitLink("ky3 disconnected", xymPrivate, "~"+xymDomain)
	eventually("ky3 disconnected", "app.ky3.rjwrn.example.com", ky3Public)
	expect("ky3 disconnected", map[string]string{"app.xym.rjwrn.example.com": xymPrivate, "www.example.test": wwwAddr})

	// xym disconnected too: the link is reverted, every name as before,
	// and nothing more goes to the clusters' DNS.
	if _, err := l.client.Disconnect(ctx, "xym"); err != nil {
		t.Fatal(err)
	}
	waitLink("all disconnected", "", "")
	eventually("all disconnected", "app.xym.rjwrn.example.com", xymPublic)
	ky3n, xymn := len(ky3.asked(ky3Domain)), len(xym.asked(xymDomain))
	expect("all disconnected", public)
	if len(ky3.asked(ky3Domain)) != ky3n || len(xym.asked(xymDomain)) != xymn {
		t.Error("all disconnected: a cluster's DNS was still asked")
	}

	// Stopping the daemon (the system service stopping) while connected
	// reverts the link and removes the tunnel; nothing stays recorded.
	if _, err := l.client.Connect(ctx, "ky3"); err != nil {
		t.Fatal(err)
	}
	l.waitStatus("ky3 up again", peerUp("ky3"))
	waitLink("ky3 reconnected", ky3Private, "~"+ky3Domain)
	eventually("ky3 reconnected", "app.ky3.rjwrn.example.com", ky3Private)
	d := l.d
	l.stop()
	d.mu.Lock()
	out := d.out.String()
	d.mu.Unlock()
	if reverted, down := strings.Index(out, "dns: tunnel link reverted"), strings.Index(out, "tunnel down"); reverted < 0 || down < 0 || reverted > down {
		t.Errorf("the daemon did not revert the link before taking the tunnel down (log offsets %d, %d)", reverted, down)
	}
	if _, err := l.laptop.Exec("ip", "link", "show", l.iface); err == nil {
		t.Errorf("the tunnel %s is still there after the daemon stopped", l.iface)
	}
	eventually("daemon stopped", "app.ky3.rjwrn.example.com", ky3Public)
	expect("daemon stopped", public)
	if _, err := os.Stat(filepath.Join(l.stateDir, "dns-changes.json")); !os.IsNotExist(err) {
		t.Errorf("a DNS change is still recorded after the daemon stopped (%v)", err)
	}
	if s := res.Resolvectl(t, "dns"); strings.Contains(s, ky3Private) || strings.Contains(s, xymPrivate) {
		t.Errorf("resolved still holds a cluster's DNS server after the daemon stopped:\n%s", s)
	}
}
