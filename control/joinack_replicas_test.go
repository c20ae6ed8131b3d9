package control

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/internal/pgtest"
)

// A join taken by one replica waits for the gateway's report taken by
// another: the acknowledgement travels as a change (control/server
// joinack.go), so the join answers once the report commits, not after the
// bound (a minute here).
func TestJoinAckAcrossReplicas(t *testing.T) {
	pg := pgtest.Start(t)
	dbURL := pg.NewDatabase(t)
	dir := t.TempDir()
	certFile, keyFile, client := certFor(t, dir)
	seedFile := world(t, dir)
	cfg := func(name, issuer string) Config {
		return Config{TLSCert: certFile, TLSKey: keyFile, Store: dbURL, Seed: seedFile, BcryptCost: 4, ReplicaName: name,
			Issuer: issuer, JoinAckTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)}
	}
	u1, _ := run(t, cfg("r1", ""))
	u2, _ := run(t, cfg("r2", u1))
	ctx := context.Background()

	// The gateway of n1 serves, through r1.
	gw := &api.Client{BaseURL: u1, Token: "enroll-n1-0123456789", HTTP: client}
	m0, err := gw.GatewayMap(ctx, 0, 0)
	if err != nil || m0.Serve == nil {
		t.Fatalf("n1's map: %+v, %v", m0, err)
	}
	k, _ := wgtypes.GeneratePrivateKey()
	report := func(v uint64) {
		t.Helper()
		if err := gw.GatewayReport(ctx, api.GatewayReport{PublicKey: k.PublicKey().String(), Version: "test",
			ServiceID: m0.Serve.ServiceID, Listening: true, ListenPort: m0.Serve.Port, MapVersion: v}); err != nil {
			t.Fatal(err)
		}
	}
	report(m0.Version)

	// A device signed in and registered at r2 joins there.
	o := &formOpener{ctx: ctx, client: client, errc: make(chan error, 1)}
	flow := &auth.Flow{Issuer: u1, ClientID: api.ClientCLI, HTTPClient: client, Opener: o, Out: io.Discard}
	tok, err := flow.SignInBrowser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-o.errc; err != nil {
		t.Fatal(err)
	}
	dev := &api.Client{BaseURL: u2, Token: tok.AccessToken, HTTP: client}
	dk, _ := wgtypes.GeneratePrivateKey()
	d, err := dev.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: dk.PublicKey().String(), Name: "laptop", OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := dev.JoinCluster(ctx, d.ID, "ky3")
		done <- err
	}()

	m, err := gw.GatewayMap(ctx, m0.Version, 30*time.Second) // r1 hears of r2's commit
	if err != nil || m.Serve == nil || len(m.Serve.Peers) != 1 || !strings.EqualFold(m.Serve.Peers[0].DeviceID, d.ID) {
		t.Fatalf("n1's map after the join at r2: %+v, %v", m, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the join at r2 answered before the gateway reported (err %v)", err)
	default:
	}
	report(m.Version)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the join at r2 did not answer after the gateway's report at r1")
	}
}
