package server

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
)

func TestOperatorTokens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ada := e.signIn("ada@example.com")
	var made *api.CreatedToken
	en := e.expectEntries("rjwrn", func() {
		var err error
		if made, err = ada.CreateToken(ctx, api.CreateTokenRequest{Name: "ci"}); err != nil {
			t.Fatal(err)
		}
	}, audit.TokenCreated)
	if made.Token == "" || made.Name != "ci" || made.State != api.TokenActive || !made.ExpiresAt.Equal(t0.Add(90*24*time.Hour)) ||
		made.CreatedBy != "ada@example.com" || en[0].Target != "ci" {
		t.Fatalf("created = %+v, entry %+v", made, en[0])
	}
	ci := e.client(made.Token)
	if _, err := ci.Clusters(ctx); err != nil {
		t.Fatalf("the new token: %v", err)
	}
	// Listed without the secret; last use recorded.
	ks, err := e.op.Tokens(ctx, "")
	if err != nil || len(ks) != 2 || ks[0].Name != "world-file" || !ks[0].ExpiresAt.IsZero() || ks[1].Name != "ci" || !ks[1].LastUsed.Equal(t0) {
		t.Fatalf("tokens = %+v, %v", ks, err)
	}
	b, _ := json.Marshal(ks)
	if strings.Contains(string(b), made.Token) || strings.Contains(string(b), `"token"`) {
		t.Fatalf("the list shows a secret: %s", b)
	}
	// Tokens are made by people, one live name at a time, within bounds.
	_, err = e.op.CreateToken(ctx, api.CreateTokenRequest{Name: "by-token"})
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = ada.CreateToken(ctx, api.CreateTokenRequest{Name: "ci"})
	wantCode(t, err, 409, api.CodeConflict)
	for _, r := range []api.CreateTokenRequest{{Name: ""}, {Name: "tok-x"}, {Name: "a b"}, {Name: "x", ExpiresInSeconds: 400 * 86400}, {Name: "x", ExpiresInSeconds: 5}} {
		_, err = ada.CreateToken(ctx, r)
		wantCode(t, err, 400, api.CodeInvalid)
	}
	// Revoked: a clear 401 saying so.
	e.expectEntries("rjwrn", func() {
		if _, err := ada.RevokeToken(ctx, "", "ci"); err != nil {
			t.Fatal(err)
		}
	}, audit.TokenRevoked)
	_, err = ci.Clusters(ctx)
	ae := wantCode(t, err, 401, api.CodeTokenRevoked)
	if ae.Message != `the operator token "ci" was revoked at 2026-03-01T12:00:00Z by ada@example.com` || !strings.Contains(ae.Hint, "runos tokens create --name ci") {
		t.Errorf("revoked token: %q (%q)", ae.Message, ae.Hint)
	}
	_, err = ada.RevokeToken(ctx, "", "ci")
	wantCode(t, err, 409, api.CodeConflict)
	_, err = ada.RevokeToken(ctx, "", "nope")
	wantCode(t, err, 404, api.CodeNotFound)
	// The name is free again; an hour's token expires after an hour.
	short, err := ada.CreateToken(ctx, api.CreateTokenRequest{Name: "ci", ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	_, err = e.client(short.Token).Clusters(ctx)
	ae = wantCode(t, err, 401, api.CodeTokenExpired)
	if ae.Message != `the operator token "ci" expired at 2026-03-01T13:00:00Z` {
		t.Errorf("expired token: %q", ae.Message)
	}
	if ks, _ := e.op.Tokens(ctx, ""); ks[2].State != api.TokenExpired || ks[1].State != api.TokenRevoked {
		t.Errorf("states = %+v", ks)
	}
	// The world file's token works until it is revoked, by id here.
	ks, _ = e.op.Tokens(ctx, "")
	if _, err := ada.RevokeToken(ctx, "", ks[0].ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.op.Clusters(ctx)
	wantCode(t, err, 401, api.CodeTokenRevoked)
}

func TestAuditPagesAndFilters(t *testing.T) {
	e, ds, _ := movingWorld(t, 2)
	ctx := context.Background()
	if err := ds[0].c.LeaveCluster(ctx, ds[0].dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	// ada signed in twice, registered two devices, joined twice, left once.
	var all []api.AuditEntry
	var before int64
	for {
		p, err := e.op.Audit(ctx, api.AuditQuery{Limit: 3, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Entries...)
		if p.Next == 0 {
			break
		}
		before = p.Next
	}
	var kinds []string
	for i, en := range all {
		kinds = append(kinds, en.Kind)
		if i > 0 && en.ID >= all[i-1].ID {
			t.Errorf("not newest first: %+v", all)
		}
	}
	want := []string{audit.DeviceLeft, audit.DeviceJoined, audit.DeviceRegistered, audit.SignedIn, audit.DeviceJoined, audit.DeviceRegistered, audit.SignedIn}
	if !slices.Equal(kinds, want) {
		t.Fatalf("pages = %q, want %q", kinds, want)
	}
	p, err := e.op.Audit(ctx, api.AuditQuery{Kind: "device", CID: "ky3"})
	if err != nil || len(p.Entries) != 3 || p.Entries[0].Kind != audit.DeviceLeft || p.Entries[0].CID != "ky3" {
		t.Errorf("device entries of ky3 = %+v, %v", p, err)
	}
	p, _ = e.op.Audit(ctx, api.AuditQuery{Actor: "nobody@example.com"})
	if len(p.Entries) != 0 {
		t.Errorf("by nobody: %+v", p)
	}
	p, _ = e.op.Audit(ctx, api.AuditQuery{Actor: "ada@example.com", Kind: audit.SignedIn})
	if len(p.Entries) != 2 || p.Entries[0].ActorKind != audit.ActorUser {
		t.Errorf("ada's sign-ins: %+v", p)
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "before=-1"} {
		if st, code := e.raw(opToken, "GET", "/v1/audit?"+q, ""); st != 400 || code != api.CodeInvalid {
			t.Errorf("%s: %d %s", q, st, code)
		}
	}
}

// Every change an operator makes leaves exactly one entry of its kind.
func TestOperatorChangesAreAudited(t *testing.T) {
	e, _, _ := movingWorld(t, 1)
	ctx := context.Background()
	ada := e.signIn("ada@example.com")
	e.expectEntries("rjwrn", func() {
		if _, err := e.op.SetNodeIngress(ctx, "ky3", "n2", api.NodeIngressRequest{IngressIP: "10.77.0.22"}); err != nil {
			t.Fatal(err)
		}
	}, audit.IngressChanged)
	e.expectEntries("rjwrn", func() {
		if _, err := ada.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "wg", TargetNodeID: "n1"}); err != nil {
			t.Fatal(err)
		}
	}, audit.ServiceAdded)
	var mv *api.Move
	en := e.expectEntries("rjwrn", func() {
		var err error
		if mv, err = ada.StartMove(ctx, "ky3", "wg-ky3", "n2"); err != nil {
			t.Fatal(err)
		}
	}, audit.MoveRequested)
	if en[0].Target != mv.ID || en[0].Actor != audit.User("ada@example.com") || en[0].CID != "ky3" {
		t.Errorf("move requested: %+v", en[0])
	}
	// The target never comes up: the move fails, in ada's name.
	en = e.expectEntries("rjwrn", func() { e.clk.Advance(15 * time.Second) }, audit.MoveFailed)
	if en[0].Target != mv.ID || en[0].Actor != audit.User("ada@example.com") || !strings.Contains(en[0].Outcome, "did not report the server listening") {
		t.Errorf("move outcome: %+v", en[0])
	}
	e.expectEntries("rjwrn", func() {
		if err := e.op.DeleteNode(ctx, "ky3", "n3", false); err != nil {
			t.Fatal(err)
		}
	}, audit.NodeDeleted)
	// Reads and refusals leave nothing.
	e.expectEntries("rjwrn", func() {
		_, _ = e.op.Cluster(ctx, "ky3")
		_, _ = e.op.Devices(ctx, api.DeviceQuery{})
		_ = e.op.DeleteNode(ctx, "ky3", "n1", false)
	})
}

func TestMoveDoneIsAudited(t *testing.T) {
	e, ds, _ := movingWorld(t, 1)
	ctx := context.Background()
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil {
		t.Fatal(err)
	}
	k2 := newKey(t)
	m2 := e.serve("ky3", "n2", k2) // listening: the switch
	en := e.expectEntries("rjwrn", func() {
		err := e.gateway("ky3", "n2").GatewayReport(ctx, api.GatewayReport{PublicKey: k2.PublicKey().String(), ServiceID: "wg-ky3",
			Listening: true, MapVersion: m2.Version, Handshakes: []api.PeerHandshake{{PublicKey: ds[0].dev.PublicKey, At: e.clk.Now()}}})
		if err != nil {
			t.Fatal(err)
		}
	}, audit.MoveDone)
	if en[0].Target != mv.ID || en[0].Actor != audit.Token("world-file") || !strings.Contains(en[0].Outcome, "1/1 devices switched") {
		t.Errorf("move done: %+v", en[0])
	}
	if svc, err := e.op.VPNService(ctx, "ky3", "wg-ky3", 0, 0); err != nil || svc.LatestMoveID != mv.ID {
		t.Errorf("the service's latest move: %+v, %v", svc, err)
	}
}
