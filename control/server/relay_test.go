package server

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// TestRelayURLInMapsAndOverride: the device map gives the hosting node's
// relay (its ingress on 443), an operator may override it per service with
// {ingress} standing for the node's address, and a move takes the relay
// along.
func TestRelayURLInMapsAndOverride(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case "vpn.abc.example.com":
				return []netip.Addr{netip.MustParseAddr("198.51.100.62")}, nil
			case "vpn.ky3.example.com":
				return []netip.Addr{netip.MustParseAddr("192.0.2.99"), netip.MustParseAddr("10.77.0.21")}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	})
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
	// Refusals: not https, a query; a host that is not the node's
	// ingress address, nor a name that resolves to it (the device would
	// hand that host its relay ticket and its traffic).
	for _, bad := range []string{"http://x/relay", "https://x/relay?a=b", "ftp://x", "https://",
		"https://attacker.example:8443/collect", "https://203.0.113.66/relay", "https://198.51.100.21/relay",
		"https://vpn.abc.example.com/r"} {
		_, err := e.op.SetServiceRelay(ctx, "ky3", "wg-ky3", api.SetRelayRequest{RelayURL: bad})
		wantCode(t, err, 400, api.CodeInvalid)
	}
	// The node's own address, or a name that resolves to it, are fine.
	for _, good := range []string{"https://10.77.0.21:8443/relay", "https://vpn.ky3.example.com/relay"} {
		if svc, err := e.op.SetServiceRelay(ctx, "ky3", "wg-ky3", api.SetRelayRequest{RelayURL: good}); err != nil || svc.Relay != good {
			t.Fatalf("set relay %s: %+v, %v", good, svc, err)
		}
	}
	// Refusals: a user who is no operator.
	_, err = e.signIn("bob@example.com").SetServiceRelay(ctx, "ky3", "wg-ky3", api.SetRelayRequest{})
	wantCode(t, err, 403, api.CodeForbidden)
	// Back to the default.
	if svc, err := e.op.SetServiceRelay(ctx, "ky3", "wg-ky3", api.SetRelayRequest{}); err != nil || svc.RelayURL != "" ||
		svc.Relay != "https://10.77.0.21/runos-vpn/relay" {
		t.Fatalf("reset: %+v, %v", svc, err)
	}
	// A service added with an override keeps it; it is checked against
	// the node it is added on.
	for _, bad := range []string{"ftp://x", "https://vpn.abc.example.com/r"} {
		if _, err := e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "vpn", TargetNodeID: "n1", RelayURL: bad}); err == nil {
			t.Fatalf("relay URL %s accepted at add on n1", bad)
		}
	}
	added, err := e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "vpn", TargetNodeID: "n2", RelayURL: "https://vpn.abc.example.com/r"})
	if err != nil || added.Relay != "https://vpn.abc.example.com/r" {
		t.Fatalf("add with a relay: %+v, %v", added, err)
	}
}

// TestRelayCheck: a device asks control for a relay ticket for one of
// its clusters and shows it (never its session token) to the relay; the
// gateway may accept the stream only for a ticket of its own cluster and
// node, of the device whose key is shown, under a live session.
func TestRelayCheck(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	e.serve("ky3", "n1", newKey(t))
	tk, err := d.c.RelayTicket(ctx, d.dev.ID, "ky3")
	if err != nil || tk.NodeID != "n1" || !tk.ExpiresAt.After(e.clk.Now()) || tk.ExpiresAt.After(e.clk.Now().Add(10*time.Minute)) {
		t.Fatalf("ticket: %+v, %v", tk, err)
	}
	if strings.Contains(tk.Ticket, d.c.Token) {
		t.Fatal("the ticket carries the session token")
	}
	gw := e.gateway("ky3", "n1")
	req := api.RelayCheckRequest{Ticket: tk.Ticket, PublicKey: d.key.PublicKey().String()}
	ok, err := gw.RelayCheck(ctx, req)
	if err != nil || ok.DeviceID != d.dev.ID || ok.User != "ada@example.com" || ok.ExpiresAt.IsZero() {
		t.Fatalf("relay check: %+v, %v", ok, err)
	}
	// A ticket is not a credential for the API.
	_, err = e.client(tk.Ticket).Me(ctx)
	wantCode(t, err, 401, api.CodeUnauthorized)

	// Tickets only for one's own device, of this sign-in, joined.
	other := e.newDevice("ada@example.com", "other") // same user, another sign-in and key
	_, err = e.signIn("bob@example.com").RelayTicket(ctx, d.dev.ID, "ky3")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.c.RelayTicket(ctx, d.dev.ID, "ky3")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.c.RelayTicket(ctx, other.dev.ID, "ky3")
	wantCode(t, err, 404, api.CodeNotFound)

	// Every refusal about the device is a 403 with the reason's code.
	for name, tc := range map[string]struct {
		gw   string
		req  api.RelayCheckRequest
		code string
	}{
		"not a ticket":          {"n1", api.RelayCheckRequest{Ticket: "nope", PublicKey: req.PublicKey}, api.CodeUnauthorized},
		"a session token":       {"n1", api.RelayCheckRequest{Ticket: d.c.Token, PublicKey: req.PublicKey}, api.CodeUnauthorized},
		"another sign-in's key": {"n1", api.RelayCheckRequest{Ticket: tk.Ticket, PublicKey: other.key.PublicKey().String()}, api.CodeForbidden},
		"another node":          {"n2", req, api.CodeForbidden},
		"operator token":        {"n1", api.RelayCheckRequest{Ticket: opToken, PublicKey: req.PublicKey}, api.CodeUnauthorized},
	} {
		_, err := e.gateway("ky3", tc.gw).RelayCheck(ctx, tc.req)
		if ae := wantCodeOf(err); ae == nil || ae.Status != http.StatusForbidden || ae.Code != tc.code {
			t.Errorf("%s: %v, want 403 %s", name, err, tc.code)
		}
	}
	// Another cluster's gateway.
	if _, err := e.gateway("xym", "n1").RelayCheck(ctx, req); wantCodeOf(err) == nil || wantCodeOf(err).Status != 403 {
		t.Errorf("xym's gateway took ky3's ticket: %v", err)
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
	tk2, err := other2.c.RelayTicket(ctx, other2.dev.ID, "ky3")
	if err != nil {
		t.Fatal(err)
	}
	req2 := api.RelayCheckRequest{Ticket: tk2.Ticket, PublicKey: other2.key.PublicKey().String()}
	if _, err := gw.RelayCheck(ctx, req2); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}
	if _, err := e.op.RevokeDevice(ctx, other2.dev.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.RelayCheck(ctx, req2); wantCodeOf(err) == nil || wantCodeOf(err).Status != 403 {
		t.Errorf("revoked device: %v, want a 403", err)
	}

	// The ticket lapses within minutes, and with its session.
	e.clk.Advance(10 * time.Minute)
	_, err = gw.RelayCheck(ctx, req)
	if ae := wantCodeOf(err); ae == nil || ae.Status != 403 || ae.Code != api.CodeSessionExpired {
		t.Errorf("lapsed ticket: %v", err)
	}
	tk, err = d.c.RelayTicket(ctx, d.dev.ID, "ky3")
	if err != nil {
		t.Fatal(err)
	}
	req.Ticket = tk.Ticket
	if _, err := gw.RelayCheck(ctx, req); err != nil {
		t.Fatalf("a fresh ticket: %v", err)
	}
	if err := d.c.EndSession(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.RelayCheck(ctx, req); wantCodeOf(err) == nil || wantCodeOf(err).Status != 403 {
		t.Errorf("a ticket of a session that ended: %v, want a 403", err)
	}
}

func wantCodeOf(err error) *api.Error {
	ae, _ := err.(*api.Error)
	return ae
}
