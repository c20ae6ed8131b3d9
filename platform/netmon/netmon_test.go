package netmon

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSource is a network whose state the test sets and whose hints it
// sends; it counts the reads.
type fakeSource struct {
	mu    sync.Mutex
	st    State
	err   error
	reads int
	hint  chan struct{}
}

func newFake(st State) *fakeSource { return &fakeSource{st: st, hint: make(chan struct{}, 100)} }

func (f *fakeSource) read() (State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.st, f.err
}
func (f *fakeSource) hints() <-chan struct{} { return f.hint }
func (f *fakeSource) close() error           { return nil }
func (f *fakeSource) set(st State) {
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
}
func (f *fakeSource) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

var (
	lan = State{Default: []Route{{Iface: "wlan0", Gateway: netip.MustParseAddr("10.77.0.1"), MTU: 1500}},
		Addrs: []Addr{{"wlan0", netip.MustParsePrefix("10.77.0.101/24"), 1500}, {"wg1", netip.MustParsePrefix("100.96.0.2/32"), 1420}}}
	wan = State{Default: []Route{{Iface: "eth0", Gateway: netip.MustParseAddr("198.51.100.1"), MTU: 1280}},
		Addrs: []Addr{{"eth0", netip.MustParsePrefix("198.51.100.101/24"), 1280}, {"wg1", netip.MustParsePrefix("100.96.0.2/32"), 1420}}}
)

func start(t *testing.T, f *fakeSource) *Monitor {
	t.Helper()
	m, err := New(Options{src: f, Ignore: func(i string) bool { return i == "wg1" }, Settle: 20 * time.Millisecond, Recheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestMonitorReportsAChangeOncePerBurst(t *testing.T) {
	f := newFake(lan)
	m := start(t, f)
	if st := m.State(); len(st.Addrs) != 1 || st.Addrs[0].Iface != "wlan0" || st.MTU() != 1500 {
		t.Fatalf("first state %v: the tunnel's address must be left out", st)
	}
	// Moving to another network is a burst of netlink messages: link down,
	// address gone, route gone, new address, new route.
	f.set(wan)
	for range 10 {
		f.hint <- struct{}{}
	}
	select {
	case c := <-m.Changes():
		if !c.Old.Equal(normalize(lan, func(i string) bool { return i == "wg1" })) || c.New.MTU() != 1280 ||
			!strings.Contains(c.New.String(), "default via 198.51.100.1 dev eth0 mtu 1280; addresses 198.51.100.101/24@eth0") {
			t.Errorf("change %v → %v", c.Old, c.New)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change reported")
	}
	select {
	case c := <-m.Changes():
		t.Fatalf("a second change for one burst: %v", c)
	case <-time.After(100 * time.Millisecond): // five settle periods: a second report would be here
	}
	if n := f.readCount(); n != 2 {
		t.Errorf("%d reads for the first state and one burst, want 2", n)
	}
}

func TestMonitorIgnoresTheTunnelAndNoChange(t *testing.T) {
	f := newFake(lan)
	m := start(t, f)
	// The daemon adds a route and an address on wg1: not a network change.
	st := lan
	st.Addrs = append(st.Addrs, Addr{"wg1", netip.MustParsePrefix("100.96.0.3/32"), 1420})
	st.Default = append(st.Default, Route{Iface: "wg1"})
	f.set(st)
	f.hint <- struct{}{}
	// A hint with nothing changed on a real interface either.
	f.hint <- struct{}{}
	deadline := time.Now().Add(5 * time.Second)
	for f.readCount() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case c := <-m.Changes():
		t.Fatalf("reported %v", c)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestMonitorRechecksWithoutHints(t *testing.T) {
	f := newFake(lan)
	m, err := New(Options{src: f, Settle: time.Millisecond, Recheck: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f.set(wan) // a notification lost
	select {
	case c := <-m.Changes():
		if c.New.MTU() != 1280 {
			t.Errorf("change %v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a change without a hint never found by the recheck")
	}
}

func TestMonitorReadErrors(t *testing.T) {
	f := newFake(lan)
	f.err = errors.New("netlink: permission denied")
	if _, err := New(Options{src: f}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("New with an unreadable network: %v", err)
	}
	f.err = nil
	m := start(t, f)
	f.mu.Lock()
	f.err = errors.New("transient")
	f.mu.Unlock()
	f.hint <- struct{}{}
	time.Sleep(60 * time.Millisecond) // the failed read happens (no state to wait for: it changes nothing)
	f.mu.Lock()
	f.err, f.st = nil, wan
	f.mu.Unlock()
	f.hint <- struct{}{}
	select {
	case <-m.Changes():
	case <-time.After(5 * time.Second):
		t.Fatal("a failed read stopped the monitor")
	}
}
