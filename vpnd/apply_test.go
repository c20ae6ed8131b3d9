package vpnd

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/store"
)

// heldDNS is fakeDNS whose Set waits while held, as a Set to a stopped
// systemd-resolved does.
type heldDNS struct {
	fakeDNS
	mu      sync.Mutex
	gate    chan struct{} // nil: not held; else closed on release
	entered chan struct{} // a Set is waiting at the gate
}

func (h *heldDNS) hold() {
	h.mu.Lock()
	h.gate = make(chan struct{})
	h.mu.Unlock()
}

func (h *heldDNS) release() {
	h.mu.Lock()
	close(h.gate)
	h.gate = nil
	h.mu.Unlock()
}

func (h *heldDNS) Set(ctx context.Context, rs []dnsplit.Route) error {
	h.mu.Lock()
	gate := h.gate
	h.mu.Unlock()
	if gate != nil {
		h.entered <- struct{}{}
		<-gate
	}
	return h.fakeDNS.Set(ctx, rs)
}

// TestPlansCoalesceBehindSlowDNS: while a DNS change hangs, the daemon
// keeps deciding (changes and status answer at once, status saying what
// was decided), the plans made meanwhile wait as one, and once DNS answers
// the latest plan is the one applied: the ones in between are skipped,
// none is applied out of order.
func TestPlansCoalesceBehindSlowDNS(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	dns := &heldDNS{entered: make(chan struct{}, 1)}
	bothUp(t, td, w, dns, &dns.fakeDNS)

	dns.hold()
	want := func(cids ...string) { td.change(func(in *state.Inputs) { in.Prefs.Wanted = cids }) }
	want("ky3")
	<-dns.entered                // the applier is stuck in Set with ky3 alone
	setsBefore := dns.setCount() // the hanging Set counts once it returns
	decided := make(chan struct{})
	go func() {
		defer close(decided)
		for i := range 50 {
			if i%2 == 0 {
				want("ky3", "xym")
			} else {
				want("ky3")
			}
			_ = td.Status()
		}
		want("xym")
	}()
	select {
	case <-decided:
	case <-time.After(10 * time.Second):
		t.Fatal("changes waited for the hanging DNS change")
	}
	if st := td.Status(); cluster(st, "ky3").Wanted || !cluster(st, "xym").Wanted {
		t.Errorf("status does not say what was decided while DNS hangs: ky3 %+v, xym %+v", cluster(st, "ky3"), cluster(st, "xym"))
	}

	dns.release()
	if err := td.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := dns.domains(); !slices.Equal(got, []string{"xym.rjwrn.example.com"}) {
		t.Errorf("DNS after the hang: %v, want xym's alone (the latest plan)", got)
	}
	if n := dns.setCount() - setsBefore; n > 2 {
		t.Errorf("%d DNS changes after the hang for 52 plans, want the hanging one and the latest", n)
	}
	if got := peerKeys(td.eng.config()); !slices.Equal(got, []string{w.serverKey("xym", "n1").String()}) {
		t.Errorf("tunnel peers %v, want xym's alone", got)
	}
}

// bothUp gives td the DNS configurator c (whose domains seen reports),
// signs in with tok1 and connects ky3 and xym, both up with their names.
func bothUp(t *testing.T, td *testDaemon, w *world, c dnsplit.Configurator, seen *fakeDNS) {
	t.Helper()
	td.mu.Lock()
	td.dns = c
	td.updateLocked()
	td.mu.Unlock()
	handOver(t, td, w, "tok1")
	for _, cid := range []string{"ky3", "xym"} {
		if _, aerr := td.connect(context.Background(), cid); aerr != nil {
			t.Fatal(aerr)
		}
	}
	eventually(t, "both up with their names", func() bool {
		st := td.Status()
		return cluster(st, "ky3").PeerUp && cluster(st, "xym").PeerUp && len(seen.domains()) == 2
	})
}

func (f *fakeDNS) setCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sets
}

// TestTunnelDoesNotWaitForPrefs: the applier changes the tunnel while the
// prefs' write (an fsync, milliseconds) is still under way, so a peer's
// handshake does not wait for the disk; DNS, which outlives a crash, is
// changed only once the prefs saying why are on disk.
func TestTunnelDoesNotWaitForPrefs(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	var mu sync.Mutex
	var gate chan struct{} // nil: writes pass
	entered := make(chan struct{}, 1)
	hold := func(d *daemon) {
		d.writePrefs = func(p store.Prefs) error {
			mu.Lock()
			g := gate
			mu.Unlock()
			if g != nil {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-g
			}
			return d.dir.SavePrefs(p)
		}
	}
	td := startDaemon(t, w, t.TempDir(), hold)
	dns := &fakeDNS{}
	bothUp(t, td, w, dns, dns)

	mu.Lock()
	gate = make(chan struct{})
	mu.Unlock()
	td.change(func(in *state.Inputs) {
		in.Prefs.Wanted = []string{"xym"}
		td.savePrefsLocked()
	})
	<-entered // the prefs' write without ky3 is held
	ky3 := w.serverKey("ky3", "n1").String()
	eventually(t, "ky3's peer gone while the prefs are written", func() bool {
		return !slices.Contains(peerKeys(td.eng.config()), ky3)
	})
	if got := dns.domains(); len(got) != 2 {
		t.Errorf("DNS set to %v before the prefs without ky3 were on disk", got)
	}
	mu.Lock()
	close(gate)
	gate = nil
	mu.Unlock()
	eventually(t, "ky3's name gone once the prefs are on disk", func() bool { return len(dns.domains()) == 1 })
	prefs, err := td.dir.LoadPrefs()
	if err != nil || !slices.Equal(prefs.Wanted, []string{"xym"}) {
		t.Errorf("prefs on disk: %v %v, want xym alone", prefs.Wanted, err)
	}
}

// TestConnectWritesPrefsWhileJoining: the prefs wanting a cluster are on
// disk before control answers its join (which waits for the serving
// gateway), so the configuration that follows the answer has no write to
// wait for; a join refused leaves the prefs as they were.
func TestConnectWritesPrefsWhileJoining(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	var mu sync.Mutex
	var writes [][]string // Wanted of each prefs write
	wrote := make(chan struct{}, 16)
	rec := func(d *daemon) {
		d.writePrefs = func(p store.Prefs) error {
			mu.Lock()
			writes = append(writes, slices.Clone(p.Wanted))
			mu.Unlock()
			select {
			case wrote <- struct{}{}:
			default:
			}
			return d.dir.SavePrefs(p)
		}
	}
	dir := t.TempDir()
	td := startDaemon(t, w, dir, rec)
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	onDisk := func() []string {
		p, err := td.dir.LoadPrefs()
		if err != nil {
			t.Fatal(err)
		}
		return p.Wanted
	}
	answered := make(chan []string, 1)
	w.fc.BeforeJoinAnswer = func(cid string) {
		if cid != "xym" {
			// The sync loop may join ky3 again meanwhile (its round's
			// joins, or a map that came before ky3's join): not the
			// connect under test, whose answer alone fills answered.
			return
		}
		deadline := time.After(5 * time.Second)
		for !slices.Contains(onDisk(), cid) {
			select {
			case <-wrote:
			case <-deadline:
				answered <- onDisk()
				return
			}
		}
		answered <- onDisk()
	}
	mu.Lock()
	before := len(writes)
	mu.Unlock()
	if _, aerr := td.connect(context.Background(), "xym"); aerr != nil {
		t.Fatal(aerr)
	}
	if got := <-answered; !slices.Equal(got, []string{"ky3", "xym"}) {
		t.Errorf("prefs on disk when control answered the join: %v, want ky3 and xym", got)
	}
	mu.Lock()
	after := slices.Clone(writes[before:])
	mu.Unlock()
	if len(after) != 1 {
		t.Errorf("prefs written %d times for one connect (%v), want once: the same prefs again are not rewritten", len(after), after)
	}

	w.fc.BeforeJoinAnswer = nil
	if _, aerr := td.connect(context.Background(), "nosuch"); aerr == nil {
		t.Fatal("a join of an unknown cluster succeeded")
	}
	if err := td.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := onDisk(); !slices.Equal(got, []string{"ky3", "xym"}) {
		t.Errorf("prefs on disk after a refused join: %v, want ky3 and xym", got)
	}
	if st := td.Status(); cluster(st, "nosuch").Wanted {
		t.Error("status wants the refused cluster")
	}
}
