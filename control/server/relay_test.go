package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// TestRelayURLInMapsAndOverride: the device map gives the hosting node's
// relay (its ingress on 443), an operator may override it per service with
// {ingress} standing for the node's address, and a move takes the relay
// along.
func TestRelayURLInMapsAndOverride(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")
	cc, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3")
	if err != nil {
		t.Fatal(err)
	}
	if cc.VPN.Relay != "https://10.77.0.21/runos-vpn/relay" {
		t.Fatalf("relay %q, want n1's ingress", cc.VPN.Relay)
	}
	e.serve("ky3", "n1", newKey(t))
	dm, _ := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)

	// Override, waking the device's long-poll.
	p := poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(ctx, d.dev.ID, dm.Version, time.Minute) })
	e.waitWatchers(1)
	svc, err := e.op.SetServiceRelay(ctx, "ky3", "wg-ky3", api.SetRelayRequest{RelayURL: "https://{ingress}:8443/relay"})
	if err != nil || svc.RelayURL != "https://{ingress}:8443/relay" || svc.Relay != "https://10.77.0.21:8443/relay" {
		t.Fatalf("set relay: %+v, %v", svc, err)
	}
	dm2, err := recv(t, p)
	if err != nil || dm2.Clusters[0].VPN.Relay != "https://10.77.0.21:8443/relay" {
		t.Fatalf("map after the override: %+v, %v", dm2, err)
	}
	// Refusals: not https, a query, a user who is no operator.
	for _, bad := range []string{"http://x/relay", "https://x/relay?a=b", "ftp://x", "https://"} {
		_, err := e.op.SetServiceRelay(ctx, "ky3", "wg-ky3", api.SetRelayRequest{RelayURL: bad})
		wantCode(t, err, 400, api.CodeInvalid)
	}
	_, err = e.signIn("bob@example.com").SetServiceRelay(ctx, "ky3", "wg-ky3", api.SetRelayRequest{})
	wantCode(t, err, 403, api.CodeForbidden)
	// Back to the default.
	if svc, err := e.op.SetServiceRelay(ctx, "ky3", "wg-ky3", api.SetRelayRequest{}); err != nil || svc.RelayURL != "" ||
		svc.Relay != "https://10.77.0.21/runos-vpn/relay" {
		t.Fatalf("reset: %+v, %v", svc, err)
	}
	// A service added with an override keeps it.
	if _, err := e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "vpn", TargetNodeID: "n1", RelayURL: "ftp://x"}); err == nil {
		t.Fatal("a bad relay URL was accepted at add")
	}
	added, err := e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "vpn", TargetNodeID: "n2", RelayURL: "https://vpn.abc.example.com/r"})
	if err != nil || added.Relay != "https://vpn.abc.example.com/r" {
		t.Fatalf("add with a relay: %+v, %v", added, err)
	}
}

// TestRelayCheck: a gateway may accept a relay stream only from a live
// session's own device, joined to its cluster, while its node serves.
func TestRelayCheck(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	e.serve("ky3", "n1", newKey(t))
	gw := e.gateway("ky3", "n1")
	req := api.RelayCheckRequest{Token: d.c.Token, PublicKey: d.key.PublicKey().String()}
	ok, err := gw.RelayCheck(ctx, req)
	if err != nil || ok.DeviceID != d.dev.ID || ok.User != "ada@example.com" || ok.ExpiresAt.IsZero() {
		t.Fatalf("relay check: %+v, %v", ok, err)
	}

	// Every refusal about the device is a 403 with the reason's code.
	other := e.newDevice("ada@example.com", "other") // same user, another sign-in and key
	for name, tc := range map[string]struct {
		gw   string
		req  api.RelayCheckRequest
		code string
	}{
		"unknown token":         {"n1", api.RelayCheckRequest{Token: "nope", PublicKey: req.PublicKey}, api.CodeUnauthorized},
		"another sign-in's key": {"n1", api.RelayCheckRequest{Token: d.c.Token, PublicKey: other.key.PublicKey().String()}, api.CodeForbidden},
		"not joined":            {"n1", api.RelayCheckRequest{Token: other.c.Token, PublicKey: other.key.PublicKey().String()}, api.CodeForbidden},
		"node not serving":      {"n2", req, api.CodeForbidden},
		"operator token":        {"n1", api.RelayCheckRequest{Token: opToken, PublicKey: req.PublicKey}, api.CodeForbidden},
	} {
		_, err := e.gateway("ky3", tc.gw).RelayCheck(ctx, tc.req)
		if ae := wantCodeOf(err); ae == nil || ae.Status != http.StatusForbidden || ae.Code != tc.code {
			t.Errorf("%s: %v, want 403 %s", name, err, tc.code)
		}
	}
	// Only gateways ask.
	_, err = d.c.RelayCheck(ctx, req)
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = e.client("bad-gateway-token").RelayCheck(ctx, req)
	wantCode(t, err, 401, api.CodeUnauthorized)

	// A revoked device is refused (its session ended with it).
	other2 := e.newDevice("ada@example.com", "spare")
	if _, err := other2.c.JoinCluster(ctx, other2.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	req2 := api.RelayCheckRequest{Token: other2.c.Token, PublicKey: other2.key.PublicKey().String()}
	if _, err := gw.RelayCheck(ctx, req2); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}
	if _, err := e.op.RevokeDevice(ctx, other2.dev.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.RelayCheck(ctx, req2); wantCodeOf(err) == nil || wantCodeOf(err).Status != 403 {
		t.Errorf("revoked device: %v, want a 403", err)
	}

	// The session lapses: refused with session_expired.
	e.clk.Advance(25 * time.Hour)
	_, err = gw.RelayCheck(ctx, req)
	if ae := wantCodeOf(err); ae == nil || ae.Status != 403 || ae.Code != api.CodeSessionExpired {
		t.Errorf("expired session: %v", err)
	}
}

func wantCodeOf(err error) *api.Error {
	ae, _ := err.(*api.Error)
	return ae
}
