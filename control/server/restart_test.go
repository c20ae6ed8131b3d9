package server

import (
	"context"
	"testing"
	"time"

	"github.com/runos/vpn/control/api"
)

// TestGatewayRestartTellsDevices: the hosting gateway's start time, once it
// listens, is in every joined device's map (serverStartedAt); a gateway
// that starts again (same key) and listens changes it, so devices handshake
// at once; the same start again, or a start not yet listening, changes
// nothing.
func TestGatewayRestartTellsDevices(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key := newKey(t)
	m := e.serve("ky3", "n1", key)
	d := e.newDevice("ada@example.com", "laptop")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	gw := e.gateway("ky3", "n1")
	report := func(started time.Time, listening bool) {
		t.Helper()
		r := api.GatewayReport{PublicKey: key.PublicKey().String(), Version: "test", ServiceID: m.Serve.ServiceID,
			Listening: listening, ListenPort: m.Serve.Port, MapVersion: m.Version, StartedAt: started}
		if err := gw.GatewayReport(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	vpn := func() (uint64, api.VPNConfig) {
		t.Helper()
		dm, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
		if err != nil || len(dm.Clusters) != 1 {
			t.Fatalf("map %+v %v", dm, err)
		}
		return dm.Version, dm.Clusters[0].VPN
	}
	first := t0.Add(-time.Minute)
	report(first, true)
	v1, c1 := vpn()
	if !c1.ServerStartedAt.Equal(first) || !c1.Ready {
		t.Fatalf("serverStartedAt %v, want %v", c1.ServerStartedAt, first)
	}
	report(first, true) // a heartbeat of the same run
	if v, _ := vpn(); v != v1 {
		t.Errorf("a heartbeat changed the device map (%d → %d)", v1, v)
	}
	second := t0.Add(time.Second)
	report(second, false) // started again, not serving yet
	if v, c := vpn(); v != v1 || !c.ServerStartedAt.Equal(first) {
		t.Errorf("a restart not yet listening told devices: %d %v", v, c.ServerStartedAt)
	}
	p := poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(ctx, d.dev.ID, v1, time.Minute) })
	report(second, true)
	dm, err := recv(t, p)
	if err != nil || dm.Version <= v1 || !dm.Clusters[0].VPN.ServerStartedAt.Equal(second) || dm.Clusters[0].VPN.PublicKey != c1.PublicKey {
		t.Fatalf("after the restart the long-poll answered %+v, %v", dm, err)
	}
	// A gateway that does not say when it started (an older one) changes nothing.
	report(time.Time{}, true)
	if v, c := vpn(); v != dm.Version || !c.ServerStartedAt.Equal(second) {
		t.Errorf("a report without startedAt: %d %v", v, c.ServerStartedAt)
	}
}
