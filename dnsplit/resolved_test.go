package dnsplit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// fakeResolved records calls as "Method idx args" lines.
type fakeResolved struct {
	mu       sync.Mutex
	calls    []string
	failOn   string
	pingErr  error
	restarts chan struct{}
}

func (f *fakeResolved) rec(method string, idx int, arg any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s %d %v", method, idx, arg))
	if method == f.failOn {
		return errors.New("access denied")
	}
	return nil
}

func (f *fakeResolved) Ping(context.Context) error { return f.pingErr }
func (f *fakeResolved) SetLinkDNS(_ context.Context, i int, s []netip.Addr) error {
	return f.rec("SetLinkDNS", i, s)
}
func (f *fakeResolved) SetLinkDomains(_ context.Context, i int, d []string) error {
	return f.rec("SetLinkDomains", i, d)
}
func (f *fakeResolved) SetLinkDefaultRoute(_ context.Context, i int, on bool) error {
	return f.rec("SetLinkDefaultRoute", i, on)
}
func (f *fakeResolved) RevertLink(_ context.Context, i int) error { return f.rec("RevertLink", i, "") }
func (f *fakeResolved) FlushCaches(context.Context) error         { return f.rec("FlushCaches", 0, "") }
func (f *fakeResolved) Close() error                              { return nil }
func (f *fakeResolved) Restarted() <-chan struct{}                { return f.restarts }

func (f *fakeResolved) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func newTestResolvedMode(t *testing.T, f *fakeResolved, index *int) (*resolvedMode, *journal) {
	t.Helper()
	opt := Options{Interface: "wg1", StateDir: filepath.Join(t.TempDir(), "state"), Logger: slog.New(slog.DiscardHandler),
		InterfaceIndex: func(name string) (int, error) {
			if name != "wg1" || *index == 0 {
				return 0, errors.New("no such network interface")
			}
			return *index, nil
		},
		// The tunnel's own address, where the splitter listens: loopback
		// here, on a free port (resolved would need 53).
		InterfaceAddr: func(string) (netip.Addr, error) { return netip.MustParseAddr("127.0.0.1"), nil }}
	_ = opt.fill()
	j, err := openJournal(opt.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	m := newResolvedMode(opt, j, f, "test")
	m.splitPort = 0
	return m, j
}

var twoClusters = []Route{
	{CID: "ky3", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"ky3.rjwrn.example.com", ".Custom.Example."}},
	{CID: "xym", Server: netip.MustParseAddr("100.100.2.1"), Domains: []string{"xym.rjwrn.example.com"}},
}

func TestResolvedModeSetsAndRevertsTheLink(t *testing.T) {
	f := &fakeResolved{}
	idx := 7
	m, j := newTestResolvedMode(t, f, &idx)
	if err := m.Set(context.Background(), twoClusters); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"SetLinkDNS 7 [127.0.0.1]", // the splitter, on the tunnel's own address
		"SetLinkDomains 7 [ky3.rjwrn.example.com custom.example xym.rjwrn.example.com]",
		"SetLinkDefaultRoute 7 false",
		"FlushCaches 0 ",
	}
	if got := f.take(); !slices.Equal(got, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if cs, _ := j.load(); len(cs) != 1 || cs[0].Kind != kindResolvedLink || cs[0].Index != 7 || cs[0].Interface != "wg1" {
		t.Errorf("journal: %+v", cs)
	}
	// The same routes again change nothing (and flush nothing).
	if err := m.Set(context.Background(), twoClusters); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); len(got) != 0 {
		t.Errorf("an unchanged Set called %v", got)
	}

	// The tunnel is recreated with a new index: the new link is set up,
	// the old one (gone) only forgotten.
	idx = 9
	if err := m.Set(context.Background(), twoClusters[:1]); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); len(got) == 0 || got[0] != "SetLinkDNS 9 [100.100.1.1]" {
		t.Errorf("after re-creation: %v", got)
	}
	if cs, _ := j.load(); len(cs) != 1 || cs[0].Index != 9 {
		t.Errorf("journal: %+v", cs)
	}

	if err := m.Set(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); len(got) == 0 || got[0] != "RevertLink 9 " {
		t.Errorf("disconnect: %v", got)
	}
	if cs, _ := j.load(); len(cs) != 0 {
		t.Errorf("journal after revert: %+v", cs)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); len(got) != 0 {
		t.Errorf("Close with nothing set called %v", got)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := m.Set(context.Background(), twoClusters); err == nil {
		t.Error("Set after Close accepted")
	}
}

func TestResolvedModeFailureRevertsAndReports(t *testing.T) {
	f := &fakeResolved{failOn: "SetLinkDomains"}
	idx := 7
	m, j := newTestResolvedMode(t, f, &idx)
	err := m.Set(context.Background(), twoClusters)
	if err == nil || !strings.Contains(err.Error(), "SetLinkDomains on wg1 (link 7): access denied") {
		t.Fatalf("err = %v", err)
	}
	if got := f.take(); !slices.Contains(got, "RevertLink 7 ") {
		t.Errorf("half-configured link not reverted: %v", got)
	}
	if cs, _ := j.load(); len(cs) != 0 {
		t.Errorf("journal after a failed Set: %+v", cs)
	}
	if st := m.Status(); st.Mode != ModeResolved || !strings.Contains(st.Error, "access denied") {
		t.Errorf("status %+v", st)
	}

	idx = 0
	f.failOn = ""
	if err := m.Set(context.Background(), twoClusters); err == nil || !strings.Contains(err.Error(), "tunnel interface wg1") {
		t.Errorf("Set without the tunnel: %v", err)
	}
}

func TestResolvedModeReappliesAfterResolvedRestarts(t *testing.T) {
	f := &fakeResolved{restarts: make(chan struct{})}
	idx := 7
	m, _ := newTestResolvedMode(t, f, &idx)
	f.restarts <- struct{}{} // nothing set yet: nothing to do
	if err := m.Set(context.Background(), twoClusters[:1]); err != nil {
		t.Fatal(err)
	}
	f.take()
	f.restarts <- struct{}{}
	f.restarts <- struct{}{} // the first is handled once this one is taken
	if got := f.take(); len(got) < 2 || got[0] != "SetLinkDNS 7 [100.100.1.1]" {
		t.Errorf("after a restart: %v", got)
	}
	// Close waits for a re-apply in flight; after it nothing is re-applied.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	close(f.restarts)
}

// askedExchanger answers every query with one A record and records which
// server was asked.
type askedExchanger struct {
	mu    sync.Mutex
	asked []string
}

func (e *askedExchanger) send(query []byte, server netip.AddrPort, _ bool, _ time.Duration, done func([]byte, error)) {
	q := new(dns.Msg)
	if err := q.Unpack(query); err != nil {
		done(nil, err)
		return
	}
	e.mu.Lock()
	e.asked = append(e.asked, strings.TrimSuffix(q.Question[0].Name, ".")+" → "+server.String())
	e.mu.Unlock()
	r := new(dns.Msg)
	r.SetReply(q)
	r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A: net.ParseIP(server.Addr().String())})
	out, _ := r.Pack()
	done(out, nil)
}

func (e *askedExchanger) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.asked
	e.asked = nil
	return a
}

// TestResolvedModeSplitterSendsEachNameToItsCluster: with two clusters the
// link's one server is the splitter, which asks each cluster's server for
// its own names only, refuses the rest without asking anyone, serves only
// the tunnel's own address, follows the routes, and stops with one cluster
// left (the link then gets that server) and on disconnect.
func TestResolvedModeSplitterSendsEachNameToItsCluster(t *testing.T) {
	f := &fakeResolved{}
	idx := 7
	m, _ := newTestResolvedMode(t, f, &idx)
	ex := &askedExchanger{}
	m.splitEx = ex
	if err := m.Set(context.Background(), twoClusters); err != nil {
		t.Fatal(err)
	}
	if m.split == nil {
		t.Fatal("no splitter with two clusters")
	}
	addr := m.split.addr.String()
	ask := func(name string, from string) (string, error) {
		t.Helper()
		c := &dns.Client{Timeout: 500 * time.Millisecond}
		if from != "" {
			c.Dialer = &net.Dialer{Timeout: 500 * time.Millisecond, LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}}
		}
		q := new(dns.Msg)
		q.SetQuestion(dns.Fqdn(name), dns.TypeA)
		r, _, err := c.Exchange(q, addr)
		if err != nil {
			return "", err
		}
		if len(r.Answer) == 0 {
			return dns.RcodeToString[r.Rcode], nil
		}
		return r.Answer[0].(*dns.A).A.String(), nil
	}
	for name, want := range map[string]string{
		"app.ky3.rjwrn.example.com": "100.100.1.1", "k8s.ky3.rjwrn.example.com": "100.100.1.1", "harbor.custom.example": "100.100.1.1",
		"app.xym.rjwrn.example.com": "100.100.2.1", "www.example.test": "REFUSED",
	} {
		if got, err := ask(name, ""); err != nil || got != want {
			t.Errorf("%s through the splitter = %q, %v; want %s", name, got, err, want)
		}
	}
	asked := ex.take()
	slices.Sort(asked)
	want := []string{"app.ky3.rjwrn.example.com → 100.100.1.1:53", "app.xym.rjwrn.example.com → 100.100.2.1:53",
		"harbor.custom.example → 100.100.1.1:53", "k8s.ky3.rjwrn.example.com → 100.100.1.1:53"}
	if !slices.Equal(asked, want) {
		t.Errorf("servers asked:\n%s\nwant:\n%s", strings.Join(asked, "\n"), strings.Join(want, "\n"))
	}
	// Another source (anything but the tunnel's own address) gets nothing.
	if got, err := ask("app.ky3.rjwrn.example.com", "127.0.0.2"); err == nil {
		t.Errorf("a query from 127.0.0.2 was answered: %s", got)
	}
	if got := ex.take(); len(got) != 0 {
		t.Errorf("a query from another source reached %v", got)
	}

	// New routes, same splitter: a third cluster's names go to its server.
	three := append(slices.Clone(twoClusters), Route{CID: "q9z", Server: netip.MustParseAddr("100.100.3.1"), Domains: []string{"q9z.rjwrn.example.com"}})
	f.take()
	if err := m.Set(context.Background(), three); err != nil {
		t.Fatal(err)
	}
	if got := m.split.addr.String(); got != addr {
		t.Errorf("splitter moved from %s to %s", addr, got)
	}
	if got, err := ask("a.q9z.rjwrn.example.com", ""); err != nil || got != "100.100.3.1" {
		t.Errorf("third cluster through the splitter = %q, %v", got, err)
	}
	if got := f.take(); len(got) == 0 || got[0] != "SetLinkDNS 7 [127.0.0.1]" {
		t.Errorf("calls with three clusters: %v", got)
	}

	// One cluster left: the link gets its server, the splitter stops.
	if err := m.Set(context.Background(), twoClusters[1:]); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); len(got) == 0 || got[0] != "SetLinkDNS 7 [100.100.2.1]" {
		t.Errorf("calls with one cluster: %v", got)
	}
	if m.split != nil {
		t.Error("splitter still runs with one cluster")
	}
	if _, err := ask("app.xym.rjwrn.example.com", ""); err == nil {
		t.Error("the stopped splitter still answers")
	}
	// Two again, then disconnect: stopped.
	if err := m.Set(context.Background(), twoClusters); err != nil || m.split == nil {
		t.Fatalf("two clusters again: %v, splitter %v", err, m.split)
	}
	if err := m.Set(context.Background(), nil); err != nil || m.split != nil {
		t.Errorf("disconnect: %v, splitter %v", err, m.split)
	}
}

// TestResolvedModeWithoutSplitterFallsBack: when the splitter cannot run
// (no tunnel address), resolved gets every cluster's server, as it would
// without one.
func TestResolvedModeWithoutSplitterFallsBack(t *testing.T) {
	f := &fakeResolved{}
	idx := 7
	m, _ := newTestResolvedMode(t, f, &idx)
	m.opt.InterfaceAddr = func(string) (netip.Addr, error) { return netip.Addr{}, errors.New("wg1 has no address") }
	if err := m.Set(context.Background(), twoClusters); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); len(got) == 0 || got[0] != "SetLinkDNS 7 [100.100.1.1 100.100.2.1]" {
		t.Errorf("calls: %v", got)
	}
	if m.split != nil {
		t.Error("a splitter without an address")
	}
}
