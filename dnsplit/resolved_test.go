package dnsplit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
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
		}}
	_ = opt.fill()
	j, err := openJournal(opt.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	return newResolvedMode(opt, j, f, "test"), j
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
		"SetLinkDNS 7 [100.100.1.1 100.100.2.1]",
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
