package server

import (
	"context"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// A gateway's report of what lies inside its cluster is kept, shown by the
// cluster's detail, pushed to the cluster's devices and gateways with the
// cluster's mapped range; a malformed one is refused.
func TestInsideReportedShownAndPushed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key := newKey(t)
	e.serve("ky3", "n1", key)
	d := e.newDevice("ada@example.com", "laptop")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	m0, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m0.Clusters[0].Inside != nil {
		t.Fatalf("inside before any report: %+v", m0.Clusters[0].Inside)
	}
	waiting := poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(ctx, d.dev.ID, m0.Version, 20*time.Second) })
	e.waitWatchers(1)

	in := api.ClusterInside{NodeNetwork: "10.10.0.0/24", PodRange: "10.244.0.0/16", ServiceRange: "10.96.0.0/12",
		DNSServer: "10.96.0.10", APIAddress: "10.10.0.100"}
	bad := in
	bad.DNSServer = "192.168.1.1"
	err = e.gateway("ky3", "n1").GatewayReport(ctx, api.GatewayReport{Version: "test", Inside: &bad})
	wantCode(t, err, 400, api.CodeInvalid)

	if err := e.gateway("ky3", "n1").GatewayReport(ctx, api.GatewayReport{Version: "test", Inside: &in}); err != nil {
		t.Fatal(err)
	}
	m1, err := recv(t, waiting)
	if err != nil {
		t.Fatal(err)
	}
	got := m1.Clusters[0].Inside
	if got == nil || got.ServiceRange != in.ServiceRange || got.DNSServer != in.DNSServer || got.Mapped == "" {
		t.Fatalf("device map inside = %+v, want %+v with a mapped range", got, in)
	}
	mapped := got.Mapped
	gm, err := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0) // touched with the cluster
	if err != nil {
		t.Fatal(err)
	}
	if gm.Serve == nil || gm.Serve.Inside == nil || gm.Serve.Inside.Mapped != mapped || gm.Serve.Inside.APIAddress != in.APIAddress {
		t.Fatalf("gateway map inside = %+v, want mapped %s", gm.Serve, mapped)
	}
	det, err := d.c.Cluster(ctx, "ky3")
	if err != nil {
		t.Fatal(err)
	}
	if det.Inside == nil || det.Inside.PodRange != in.PodRange || det.Inside.Mapped != mapped {
		t.Fatalf("cluster detail inside = %+v", det.Inside)
	}
	// xym has another mapped range, whatever it declares.
	if err := e.gateway("xym", "n1").GatewayReport(ctx, api.GatewayReport{Version: "test", Inside: &in}); err != nil {
		t.Fatal(err)
	}
	x, err := d.c.Cluster(ctx, "xym")
	if err != nil {
		t.Fatal(err)
	}
	if x.Inside == nil || x.Inside.Mapped == "" || x.Inside.Mapped == mapped {
		t.Fatalf("xym's mapped range %+v, ky3's %s", x.Inside, mapped)
	}
	// The same report again bumps nothing.
	v := e.version()
	if err := e.gateway("ky3", "n2").GatewayReport(ctx, api.GatewayReport{Version: "test", Inside: &in}); err != nil {
		t.Fatal(err)
	}
	if e.version() != v {
		t.Fatalf("an unchanged inside bumped the version %d → %d", v, e.version())
	}
}
