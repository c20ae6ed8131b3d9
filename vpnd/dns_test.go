package vpnd

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/vpnd/localapi"
)

// fakeDNS records the routes the daemon sets.
type fakeDNS struct {
	mu     sync.Mutex
	routes []dnsplit.Route
	sets   int
	fail   error
	closed bool
}

func (f *fakeDNS) Set(_ context.Context, rs []dnsplit.Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets++
	if f.fail != nil {
		return f.fail
	}
	f.routes = slices.Clone(rs)
	return nil
}

func (f *fakeDNS) Status() dnsplit.Status {
	return dnsplit.Status{Mode: dnsplit.ModeResolvConf, Reason: "no systemd-resolved on this machine"}
}

func (f *fakeDNS) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.routes = nil
	return nil
}

func (f *fakeDNS) domains() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.routes {
		out = append(out, r.Domains...)
	}
	return out
}

func TestSplitDNSFollowsClusters(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	dns := &fakeDNS{}
	td.mu.Lock()
	td.dns = dns
	td.updateLocked()
	td.mu.Unlock()
	if err := td.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := td.Status(); st.DNS.Mode != dnsplit.ModeResolvConf || st.DNS.Reason == "" {
		t.Fatalf("dns status %+v", st.DNS)
	}
	handOver(t, td, w, "tok1")
	for _, cid := range []string{"ky3", "xym"} {
		if _, aerr := td.connect(context.Background(), cid); aerr != nil {
			t.Fatal(aerr)
		}
	}
	eventually(t, "both clusters' domains routed", func() bool {
		return slices.Equal(dns.domains(), []string{"ky3.rjwrn.example.com", "xym.rjwrn.example.com"})
	})
	c := cluster(td.Status(), "ky3")
	if c.DNS.Server != "100.100.1.1" || !slices.Equal(c.DNS.Domains, []string{"ky3.rjwrn.example.com"}) {
		t.Errorf("ky3 dns in status: %+v", c.DNS)
	}
	if _, aerr := td.disconnect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	if got := dns.domains(); !slices.Equal(got, []string{"xym.rjwrn.example.com"}) {
		t.Errorf("after disconnecting ky3: %v", got)
	}
	// A failing configurator shows in status and is retried.
	dns.mu.Lock()
	dns.fail = errors.New("resolv.conf: read-only file system")
	dns.mu.Unlock()
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	eventually(t, "dns error in status", func() bool { return td.Status().DNS.Error != "" })
	if st := td.Status(); !slices.ContainsFunc(st.Warnings, func(w localapi.Warning) bool { return w.Code == localapi.WarnDNS }) {
		t.Errorf("no dns warning for the DNS error: %+v", st)
	}
	dns.mu.Lock()
	dns.fail = nil
	dns.mu.Unlock()
	eventually(t, "retried", func() bool { return len(dns.domains()) == 2 && td.Status().DNS.Error == "" })

	// The session lapses: every DNS route goes.
	w.fc.ExpireSession("tok1")
	eventually(t, "dns routes removed", func() bool { return len(dns.domains()) == 0 })
	if st := td.Status(); st.Session.State != localapi.SessionExpired {
		t.Errorf("session %+v", st.Session)
	}
}
