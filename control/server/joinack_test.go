package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// joinAcks records what the server counts of joins' waits.
type joinAcks struct {
	noMetrics
	mu sync.Mutex
	n  map[string]int
}

func (m *joinAcks) JoinAcked(outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n[outcome]++
}

func (m *joinAcks) count(outcome string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[outcome]
}

type joinResult struct {
	cc  *api.ClusterConfig
	err error
}

func joinAsync(d *device, cid string) <-chan joinResult {
	ch := make(chan joinResult, 1)
	go func() {
		cc, err := d.c.JoinCluster(context.Background(), d.dev.ID, cid)
		ch <- joinResult{cc, err}
	}()
	return ch
}

// A join answers only after the serving gateway reported a map that holds
// the device: not while the gateway has yet to see it, not on a report of
// an older map, and at once on the report of the map with the device.
func TestJoinAnswersOnceTheGatewayHoldsTheDevice(t *testing.T) {
	acks := &joinAcks{n: map[string]int{}}
	e := newEnv(t, func(c *Config) { c.JoinAckTimeout = time.Minute; c.Metrics = acks })
	ctx := context.Background()
	key := newKey(t)
	m0 := e.serve("ky3", "n1", key)
	d := e.newDevice("bob@example.com", "laptop")
	gw := e.gateway("ky3", "n1")

	done := joinAsync(d, "ky3")
	// The gateway's long-poll returns the map with the device once the
	// join has committed: the join is now waiting for the gateway.
	m, err := gw.GatewayMap(ctx, m0.Version, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Serve == nil || len(m.Serve.Peers) != 1 || m.Serve.Peers[0].DeviceID != d.dev.ID {
		t.Fatalf("the gateway's map after the join: %+v", m.Serve)
	}
	report := func(v uint64) {
		t.Helper()
		if err := gw.GatewayReport(ctx, api.GatewayReport{PublicKey: key.PublicKey().String(), Version: "test",
			ServiceID: m.Serve.ServiceID, Listening: true, ListenPort: m.Serve.Port, MapVersion: v}); err != nil {
			t.Fatal(err)
		}
	}
	notYet := func(when string) {
		t.Helper()
		select {
		case r := <-done:
			t.Fatalf("the join answered %s (err %v)", when, r.err)
		default:
		}
	}
	notYet("before the gateway reported")
	report(m0.Version) // a heartbeat of the map before the join
	notYet("on a report of the map without the device")

	report(m.Version)
	select {
	case r := <-done:
		if r.err != nil || r.cc.VPN.Subnet == "" {
			t.Fatalf("join: %+v, %v", r.cc, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the join did not answer after the gateway's report of the map with the device")
	}
	if a, to := acks.count("acked"), acks.count("timeout"); a != 1 || to != 0 {
		t.Errorf("counted acked %d, timeout %d; want 1, 0", a, to)
	}

	// The same report again bumps nothing; a join already acknowledged
	// (the device is in the map the gateway reported) answers at once.
	before := e.version()
	report(m.Version)
	if e.version() != before {
		t.Error("the same report again bumped the version")
	}
	if r := <-joinAsync(d, "ky3"); r.err != nil {
		t.Fatal(r.err)
	}
	if a := acks.count("acked"); a != 2 {
		t.Errorf("counted acked %d after the second join, want 2", a)
	}
}

// A gateway that never acknowledges costs a join the bound, no more: the
// join still succeeds and the timeout is counted.
func TestJoinAnswersAfterTheBoundWithoutAnAck(t *testing.T) {
	acks := &joinAcks{n: map[string]int{}}
	e := newEnv(t, func(c *Config) { c.JoinAckTimeout = 50 * time.Millisecond; c.Metrics = acks })
	e.serve("ky3", "n1", newKey(t))
	d := e.newDevice("bob@example.com", "laptop")
	start := time.Now()
	r := <-joinAsync(d, "ky3")
	if r.err != nil || r.cc.VPN.Subnet == "" {
		t.Fatalf("join: %+v, %v", r.cc, r.err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("the join answered after %s, before the bound and with no ack", waited)
	}
	if a, to := acks.count("acked"), acks.count("timeout"); a != 0 || to != 1 {
		t.Errorf("counted acked %d, timeout %d; want 0, 1", a, to)
	}
}

// A gateway that no longer reports (its heartbeat is stale) is not waited
// for at all: no wait could help.
func TestJoinDoesNotWaitForASilentGateway(t *testing.T) {
	acks := &joinAcks{n: map[string]int{}}
	e := newEnv(t, func(c *Config) { c.JoinAckTimeout = time.Minute; c.Metrics = acks })
	e.serve("ky3", "n1", newKey(t))
	e.clk.Advance(31 * time.Second) // past the heartbeat timeout
	d := e.newDevice("bob@example.com", "laptop")
	if r := <-joinAsync(d, "ky3"); r.err != nil {
		t.Fatal(r.err)
	}
	if a, to := acks.count("acked"), acks.count("timeout"); a != 0 || to != 0 {
		t.Errorf("counted acked %d, timeout %d; want no wait", a, to)
	}
}
