package vpnd

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/internal/wgtest"
	"github.com/runos/vpn/vpnd/localapi"
)

// dnsServer answers A queries for names under the given suffixes, REFUSED
// for anything else (as a cluster's DNS does), in ns on addr, and logs
// every question with the address it came from.
func dnsServer(t *testing.T, ns *netnstest.NS, addr string, answers map[string]string) *dnsLog {
	t.Helper()
	pc := listenPacketIn(t, ns, addr)
	log := &dnsLog{}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Rcode = dns.RcodeRefused
		if len(r.Question) == 1 {
			q := r.Question[0]
			log.add(q.Name, w.RemoteAddr())
			for suffix, ip := range answers {
				if dns.IsSubDomain(dns.Fqdn(suffix), q.Name) {
					m.Rcode = dns.RcodeSuccess
					if q.Qtype == dns.TypeA {
						m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
							A: netip.MustParseAddr(ip).AsSlice()})
					}
				}
			}
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: h}
	go srv.ActivateAndServe()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return log
}

// dnsLog is what a dnsServer was asked, and from where.
type dnsLog struct {
	mu sync.Mutex
	qs []loggedQuery
}

type loggedQuery struct {
	name string // lower case, no final dot
	from netip.Addr
}

func (l *dnsLog) add(name string, from net.Addr) {
	q := loggedQuery{name: strings.TrimSuffix(strings.ToLower(name), ".")}
	if ap, err := netip.ParseAddrPort(from.String()); err == nil {
		q.from = ap.Addr().Unmap()
	}
	l.mu.Lock()
	l.qs = append(l.qs, q)
	l.mu.Unlock()
}

// asked is every question so far for name or a name under it.
func (l *dnsLog) asked(name string) []loggedQuery {
	l.mu.Lock()
	defer l.mu.Unlock()
	var qs []loggedQuery
	for _, q := range l.qs {
		if q.name == name || strings.HasSuffix(q.name, "."+name) {
			qs = append(qs, q)
		}
	}
	return qs
}

// TestDaemonSplitDNSReal runs the daemon with the real dnsplit in
// resolv.conf mode: cluster names resolve over the tunnel to the cluster's
// DNS only while connected, everything else as before, and resolv.conf is
// byte for byte what it was after down and after --cleanup following a
// crash.
func TestDaemonSplitDNSReal(t *testing.T) {
	if part := wgtest.Inside(); part != "" {
		insideDaemon(t, part)
		return
	}
	netnstest.Require(t, "getent")
	l := newLab(t)
	// `ip netns exec` mounts this file over /etc/resolv.conf for the daemon
	// and for every lookup below.
	etc := filepath.Join("/etc/netns", l.laptop.Name)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(etc) })
	resolvConf := filepath.Join(etc, "resolv.conf")
	const original = "# the LAN's resolver\nsearch lab.example\nnameserver 10.0.0.2\noptions timeout:1 attempts:2\n"
	if err := os.WriteFile(resolvConf, []byte(original), 0o644); err != nil {
		t.Fatal(err)
	}
	dnsServer(t, l.ctl, "10.0.0.2:53", map[string]string{
		"www.example.test": "192.0.2.80", "ky3.rjwrn.example.com": "198.51.100.21", "xym.rjwrn.example.com": "198.51.100.31"})
	dnsServer(t, l.servers["ky3/n1"].NS, "100.100.1.1:53", map[string]string{"ky3.rjwrn.example.com": "100.100.1.1"})
	dnsServer(t, l.servers["xym/n1"].NS, "100.100.2.1:53", map[string]string{"xym.rjwrn.example.com": "100.100.2.1"})

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
	expect("before the daemon", map[string]string{"app.ky3.rjwrn.example.com": "198.51.100.21", "www.example.test": "192.0.2.80"})

	l.env = []string{"T_DNS=1"}
	l.start()
	ctx := context.Background()
	st, _ := l.client.Status(ctx)
	if st.DNS.Mode != dnsplit.ModeResolvConf {
		t.Fatalf("dns mode %+v", st.DNS)
	}
	l.signIn(t)
	if _, err := l.client.Connect(ctx, "ky3"); err != nil {
		t.Fatal(err)
	}
	l.waitStatus("ky3 up", peerUp("ky3"))
	expect("ky3 connected", map[string]string{
		"app.ky3.rjwrn.example.com": "100.100.1.1", "k8s.ky3.rjwrn.example.com": "100.100.1.1",
		"app.xym.rjwrn.example.com": "198.51.100.31", "www.example.test": "192.0.2.80"})
	if _, err := l.client.Connect(ctx, "xym"); err != nil {
		t.Fatal(err)
	}
	l.waitStatus("xym up", peerUp("xym"))
	expect("both connected", map[string]string{"app.xym.rjwrn.example.com": "100.100.2.1", "app.ky3.rjwrn.example.com": "100.100.1.1"})
	if _, err := l.client.Disconnect(ctx, "ky3"); err != nil {
		t.Fatal(err)
	}
	expect("ky3 disconnected", map[string]string{"app.ky3.rjwrn.example.com": "198.51.100.21", "app.xym.rjwrn.example.com": "100.100.2.1"})

	// A crash while connected, then --cleanup: resolv.conf is restored.
	l.kill9()
	if b, _ := os.ReadFile(resolvConf); string(b) == original {
		t.Fatal("resolv.conf was not pointed at the forwarder while connected")
	}
	wgtest.RunInside(t, l.laptop, "TestDaemonSplitDNSReal", "cleanup", "T_STATE="+l.stateDir, "T_SOCKET="+l.socket,
		"T_CA="+l.caFile, "T_IFACE="+l.iface, "T_DNS=1")
	if b, _ := os.ReadFile(resolvConf); string(b) != original {
		t.Fatalf("after --cleanup resolv.conf is:\n%s", b)
	}
	expect("after the crash clean-up", map[string]string{"www.example.test": "192.0.2.80", "app.xym.rjwrn.example.com": "198.51.100.31"})

	// A fresh start reconnects xym (and its DNS); down restores resolv.conf.
	l.start()
	l.waitStatus("xym back", peerUp("xym"))
	expect("after restart", map[string]string{"app.xym.rjwrn.example.com": "100.100.2.1", "www.example.test": "192.0.2.80"})
	st, err := l.client.EndSession(ctx)
	if err != nil || st.Session.State != localapi.SessionSignedOut {
		t.Fatalf("down: %v %+v", err, st)
	}
	if b, _ := os.ReadFile(resolvConf); string(b) != original {
		t.Errorf("after down resolv.conf is:\n%s", b)
	}
	expect("after down", map[string]string{"app.xym.rjwrn.example.com": "198.51.100.31", "www.example.test": "192.0.2.80"})
	l.stop()
	if b, _ := os.ReadFile(resolvConf); string(b) != original {
		t.Errorf("after stop resolv.conf is:\n%s", b)
	}
}
