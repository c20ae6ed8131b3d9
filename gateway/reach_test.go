package gateway

import (
	"errors"
	"sync"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/gateway/reach"
)

type fakeReach struct {
	mu     sync.Mutex
	specs  []reach.Spec
	closes int
	fail   error
}

func (f *fakeReach) Apply(s reach.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.specs = append(f.specs, s)
	return f.fail
}

func (f *fakeReach) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes++
	return nil
}

// Serving with an inside forwards into it on the serving interface (the
// mapped range with it); a failure is reported and retried; stopping
// serving stops forwarding.
func TestReachFollowsServing(t *testing.T) {
	fr := &fakeReach{fail: errors.New("nft: no tproxy")}
	h := start(t, func(c *Config) { c.Reach = fr })
	p1, _ := peer(t, "dev1", "100.96.0.2")
	svc := service(api.GatewayActive, p1)
	svc.Inside = &api.ClusterInside{ServiceRange: "10.96.0.0/12", DNSServer: "10.96.0.10", Mapped: "fd52:4f53:5600:2::/96"}
	v := h.ctl.set(svc)
	r := h.ctl.waitReport(t, "the failure", func(r api.GatewayReport) bool { return r.MapVersion == v && r.Error != "" })
	if r.Error == "" || !r.Listening {
		t.Fatalf("report: %+v", r)
	}
	fr.mu.Lock()
	fr.fail = nil
	fr.mu.Unlock()
	h.ctl.waitReport(t, "the retry", func(r api.GatewayReport) bool { return r.MapVersion == v && r.Error == "" })
	fr.mu.Lock()
	last := fr.specs[len(fr.specs)-1]
	fr.mu.Unlock()
	if last.Interface != "wgtest" || len(last.Prefixes) != 1 || last.Prefixes[0].String() != "10.96.0.0/12" ||
		last.Mapped.String() != "fd52:4f53:5600:2::/96" || last.Server.String() != "100.100.1.1" || last.DevicePool.String() != "100.96.0.0/16" {
		t.Fatalf("spec %+v", last)
	}
	v = h.ctl.set(nil)
	h.ctl.waitReport(t, "not serving", atVersion(v))
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.closes != 1 {
		t.Fatalf("forwarding closed %d times", fr.closes)
	}
}
