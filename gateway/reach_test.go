package gateway

import (
	"errors"
	"slices"
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

// TestJoinAppliesOnlyPeers: a map that only adds a device (a join, whose
// answer waits for this gateway's report) configures the server's peers
// and leaves its interface as the last map set it; a map that removes one,
// and any map after a failed one, sets everything again. The forwarding
// is applied for every map (it installs nothing when its rules are the
// same).
func TestJoinAppliesOnlyPeers(t *testing.T) {
	fr := &fakeReach{}
	h := start(t, func(c *Config) { c.Reach = fr })
	p1, _ := peer(t, "dev1", "100.96.0.2")
	p2, _ := peer(t, "dev2", "100.96.0.3")
	inside := &api.ClusterInside{ServiceRange: "10.96.0.0/12", DNSServer: "10.96.0.10", Mapped: "fd52:4f53:5600:2::/96"}
	set := func(what string, peers ...api.GatewayPeer) {
		t.Helper()
		svc := service(api.GatewayActive, peers...)
		svc.Inside = inside
		v := h.ctl.set(svc)
		h.ctl.waitReport(t, what, func(r api.GatewayReport) bool { return r.MapVersion == v && r.Listening })
	}
	kinds := func() (onlyPeers []bool, reaches int) {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		fr.mu.Lock()
		defer fr.mu.Unlock()
		return slices.Clone(h.srv.onlyPeers), len(fr.specs)
	}
	set("serving dev1", p1)
	set("dev2 joined", p1, p2)
	if got, reaches := kinds(); !slices.Equal(got, []bool{false, true}) || reaches != 2 {
		t.Fatalf("after a join: applies only-peers %v, forwarding applied %d times; want [false true] and 2", got, reaches)
	}
	set("dev1 left", p2)
	if got, reaches := kinds(); !slices.Equal(got, []bool{false, true, false}) || reaches != 3 {
		t.Fatalf("after a leave: applies only-peers %v, forwarding applied %d times; want [false true false] and 3", got, reaches)
	}
	// A join after a failed forwarding sets everything again.
	fr.mu.Lock()
	fr.fail = errors.New("nft: busy")
	fr.mu.Unlock()
	svc := service(api.GatewayActive, p2)
	svc.Inside = &api.ClusterInside{ServiceRange: "10.96.0.0/12", PodRange: "10.244.0.0/16", DNSServer: "10.96.0.10", Mapped: "fd52:4f53:5600:2::/96"}
	v := h.ctl.set(svc)
	h.ctl.waitReport(t, "the failure", func(r api.GatewayReport) bool { return r.MapVersion == v && r.Error != "" })
	// Still failing (retries included, none of them can succeed): the join
	// that follows must try the forwarding again too.
	_, before := kinds()
	svc.Peers = []api.GatewayPeer{p2, p1}
	v = h.ctl.set(svc)
	h.ctl.waitReport(t, "dev1 back", func(r api.GatewayReport) bool { return r.MapVersion == v && r.Error != "" })
	got, after := kinds()
	if got[len(got)-1] || after == before {
		t.Fatalf("a join after a failed map: applies only-peers %v, forwarding applied %d → %d times; want a full apply", got, before, after)
	}
}
