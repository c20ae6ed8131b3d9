package vpnd

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/platform/netmon"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/wake"
)

// fakeMonitor is a network monitor the test drives.
type fakeMonitor struct {
	st      netmon.State
	changes chan netmon.Change
	ignored func(string) bool
	mu      sync.Mutex
	closed  bool
}

func (m *fakeMonitor) Changes() <-chan netmon.Change { return m.changes }
func (m *fakeMonitor) State() netmon.State           { return m.st }
func (m *fakeMonitor) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// recheckDNS is a fakeDNS that also counts Rechecks.
type recheckDNS struct {
	fakeDNS
	rechecks int
}

func (r *recheckDNS) Recheck() {
	r.mu.Lock()
	r.rechecks++
	r.mu.Unlock()
}

var (
	lanState = netmon.State{Default: []netmon.Route{{Iface: "lan0", Gateway: netip.MustParseAddr("10.77.0.53"), MTU: 1500}},
		Addrs: []netmon.Addr{{Iface: "lan0", Addr: netip.MustParsePrefix("10.77.0.101/24")}}}
	wanState = netmon.State{Default: []netmon.Route{{Iface: "wan0", Gateway: netip.MustParseAddr("198.51.100.53"), MTU: 1280}},
		Addrs: []netmon.Addr{{Iface: "wan0", Addr: netip.MustParsePrefix("198.51.100.101/24")}}}
)

// TestNetworkChangeRebindsAndRehandshakes: on a change of uplink the daemon
// records it in status, clamps TCP to the new MTU, has the tunnel rebind and
// re-handshake, and has DNS look again; the tunnel's own interface is what
// the monitor is told to leave out.
func TestNetworkChangeRebindsAndRehandshakes(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	dns := &recheckDNS{}
	td.mu.Lock()
	td.dns = dns
	td.mu.Unlock()
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	mon := &fakeMonitor{st: lanState, changes: make(chan netmon.Change, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	wait := td.watchNetworkAndSleep(ctx, Config{NetMon: func(ignore func(string) bool, _ *slog.Logger) (NetMonitor, error) {
		mon.ignored = ignore
		return mon, nil
	}}, "wgfake")
	defer func() { cancel(); wait() }()
	if !mon.ignored("wgfake") || mon.ignored("lan0") {
		t.Error("the monitor is not told to leave out the tunnel (and only it)")
	}
	eventually(t, "the uplink in status", func() bool { return td.Status().Network.MTU == 1500 })
	if td.eng.uplinkMTUNow() != 1500 {
		t.Errorf("uplink MTU %d given to the tunnel", td.eng.uplinkMTUNow())
	}
	mon.changes <- netmon.Change{Old: lanState, New: wanState}
	eventually(t, "rebound after the change", func() bool { return td.eng.rebindCount() == 1 })
	st := td.Status()
	if st.Network.MTU != 1280 || st.Network.ChangedAt.IsZero() || st.Network.Uplink != wanState.String() {
		t.Errorf("network in status: %+v", st.Network)
	}
	if td.eng.uplinkMTUNow() != 1280 {
		t.Errorf("TCP not clamped to the new uplink: %d", td.eng.uplinkMTUNow())
	}
	dns.mu.Lock()
	n := dns.rechecks
	dns.mu.Unlock()
	if n != 1 {
		t.Errorf("DNS rechecked %d times, want 1", n)
	}
}

// TestWakeAfterTheSessionLapsed: waking after the session's end takes the
// tunnel's peers and DNS down at once and says when it lapsed.
func TestWakeAfterTheSessionLapsed(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	dns := &recheckDNS{}
	td.mu.Lock()
	td.dns = dns
	td.mu.Unlock()
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	eventually(t, "connected", func() bool { return cluster(td.Status(), "ky3").PeerUp && len(dns.domains()) == 1 })
	exp := td.Status().Session.ExpiresAt
	// The laptop slept past the session's end: the daemon's clock jumps.
	now := exp.Add(10 * time.Minute)
	td.mu.Lock()
	td.clock = func() time.Time { return now }
	td.mu.Unlock()
	td.woke(wake.Sleep{From: exp.Add(-time.Hour), To: now})
	st := td.Status()
	if err := td.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st.Session.State != localapi.SessionExpired || st.Session.Error == "" {
		t.Fatalf("session after waking: %+v", st.Session)
	}
	if len(td.eng.config().Peers) != 0 || len(td.eng.config().Routes) != 0 || len(dns.domains()) != 0 {
		t.Errorf("still configured after the lapse: %+v, dns %v", td.eng.config(), dns.domains())
	}
	if c := cluster(st, "ky3"); c.State == localapi.ClusterConnected || c.PeerUp {
		t.Errorf("ky3 still connected: %+v", c)
	}
	if td.eng.rebindCount() != 1 {
		t.Errorf("%d rebinds after waking, want 1", td.eng.rebindCount())
	}
}

func (e *fakeEngine) rebindCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rebinds
}

func (e *fakeEngine) uplinkMTUNow() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.uplinkMTU
}
