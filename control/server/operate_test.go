package server

import (
	"context"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
)

const operatePolicy = `version 1
group oncall: bob@example.com
allow * -> *: *
operate group:oncall -> ky3: move-services
`

// An `operate` rule gives a group an operator verb on one cluster: bob (in
// oncall) may plan ky3's move, and nothing more; cal, in the account but
// not the group, may not; eve of another account does not even see ky3.
func TestOperateRuleGrantsAVerbOnACluster(t *testing.T) {
	w := testWorld()
	w.Users = append(w.Users, api.WorldUser{Email: "cal@example.com", Password: password, Accounts: []string{"rjwrn"}})
	e := newEnvOf(t, w)
	ctx := context.Background()
	bob, cal, eve := e.signIn("bob@example.com"), e.signIn("cal@example.com"), e.signIn("eve@example.com")

	// Before the rule, bob is refused like any non-operator.
	_, err := bob.MovePlan(ctx, "ky3", "wg-ky3", "n2")
	wantCode(t, err, 403, api.CodeForbidden)

	if _, err := e.op.SetPolicy(ctx, "rjwrn", operatePolicy); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.MovePlan(ctx, "ky3", "wg-ky3", "n2"); err != nil {
		t.Fatalf("bob, granted move-services on ky3, plans its move: %v", err)
	}
	// Not another verb, not another cluster.
	_, err = bob.DeletePreflight(ctx, "ky3", "n2")
	if ae := wantCode(t, err, 403, api.CodeForbidden); !strings.Contains(ae.Message, "manage-nodes in ky3") {
		t.Errorf("bob's node removal on ky3: %q", ae.Message)
	}
	_, err = bob.MovePlan(ctx, "xym", "wg-xym", "n1")
	wantCode(t, err, 403, api.CodeForbidden)
	// Nobody else.
	_, err = cal.MovePlan(ctx, "ky3", "wg-ky3", "n2")
	if ae := wantCode(t, err, 403, api.CodeForbidden); !strings.Contains(ae.Message, "no rule lets cal@example.com (in no group) move-services in ky3") {
		t.Errorf("cal's move on ky3: %q", ae.Message)
	}
	_, err = eve.MovePlan(ctx, "ky3", "wg-ky3", "n2")
	wantCode(t, err, 404, api.CodeNotFound)
	// The world file's operator keeps every verb.
	if _, err := e.signIn("ada@example.com").DeletePreflight(ctx, "ky3", "n2"); err != nil {
		t.Fatalf("ada (operator) removes a node: %v", err)
	}
}

// revoke-devices on ky3: bob may revoke a device that joined ky3, not one
// that joined only xym; cal, granted nothing, may revoke none.
func TestOperateRuleRevokesDevicesOfACluster(t *testing.T) {
	w := testWorld()
	w.Users = append(w.Users, api.WorldUser{Email: "cal@example.com", Password: password, Accounts: []string{"rjwrn"}})
	e := newEnvOf(t, w)
	ctx := context.Background()
	if _, err := e.op.SetPolicy(ctx, "rjwrn", "version 1\ngroup oncall: bob@example.com\nallow * -> *: *\noperate group:oncall -> ky3: revoke-devices\n"); err != nil {
		t.Fatal(err)
	}
	onKy3, onXym := e.newDevice("cal@example.com", "cal-ky3"), e.newDevice("cal@example.com", "cal-xym")
	for _, j := range []struct {
		d   *device
		cid string
	}{{onKy3, "ky3"}, {onXym, "xym"}} {
		if _, err := j.d.c.JoinCluster(ctx, j.d.dev.ID, j.cid); err != nil {
			t.Fatal(err)
		}
	}
	bob, cal := e.signIn("bob@example.com"), e.signIn("cal@example.com")
	_, err := cal.RevokeDevice(ctx, onKy3.dev.ID)
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.RevokeDevice(ctx, onXym.dev.ID)
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.RevokeDevice(ctx, "dev-nope")
	wantCode(t, err, 403, api.CodeForbidden)
	got, err := bob.RevokeDevice(ctx, onKy3.dev.ID)
	if err != nil {
		t.Fatalf("bob, granted revoke-devices on ky3, revokes a device on ky3: %v", err)
	}
	if got.RevokedBy != "bob@example.com" {
		t.Errorf("revoked: %+v", got)
	}
	_, err = onKy3.c.Me(ctx)
	wantCode(t, err, 401, api.CodeDeviceRevoked)
	if _, err := onXym.c.Me(ctx); err != nil {
		t.Errorf("cal's other device after the revoke: %v", err)
	}
}
