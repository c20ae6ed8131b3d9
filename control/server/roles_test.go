package server

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
)

// Operator is a role a user has in an account (issue 22, the security
// review's third finding): acme's operator saw and revoked a device of a
// user who had joined only beta's cluster, and an operator of acme who was
// a plain member of beta operated beta too.

const (
	acmeToken = "operator-token-acme-0123456789"
	betaToken = "operator-token-beta-0123456789"
)

// twoAccounts: acme (cluster ac1) and beta (cluster bt1), each with a VPN
// service; ops@acme operates acme and is a plain member of beta; sam is a
// member of both; bea operates beta; amy is in acme alone.
func twoAccounts() api.World {
	cluster := func(cid, aid string) api.WorldCluster {
		return api.WorldCluster{CID: cid, AID: aid, Name: cid, DomainRoot: "example.com", IsConfigured: true,
			Nodes: []api.WorldNode{{NID: "n1", Roles: []string{api.RoleControlPlane, api.RoleWorker},
				PublicIP: map[string]string{"ac1": "198.51.100.71", "bt1": "198.51.100.72"}[cid], Published: true, EnrollmentToken: enroll(cid, "n1")}},
			VPNService: &api.WorldVPNService{ID: "wg-" + cid, NodeID: "n1"}}
	}
	return api.World{
		Accounts: []api.WorldAccount{{AID: "acme", OperatorToken: acmeToken}, {AID: "beta", OperatorToken: betaToken}},
		Users: []api.WorldUser{
			{Email: "ops@acme.example", Password: password, Accounts: []string{"acme", "beta"}, OperatorOf: []string{"acme"}},
			{Email: "sam@example.com", Password: password, Accounts: []string{"acme", "beta"}},
			{Email: "bea@beta.example", Password: password, Accounts: []string{"beta"}, Operator: true},
			{Email: "amy@acme.example", Password: password, Accounts: []string{"acme"}},
		},
		Clusters: []api.WorldCluster{cluster("ac1", "acme"), cluster("bt1", "beta")},
	}
}

// names shows devices as name(cids of the clusters shown), sorted; an
// error as itself.
func names(ds []api.DeviceDetail, err error) string {
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, d := range ds {
		var cids []string
		for _, c := range d.Clusters {
			cids = append(cids, c.CID)
		}
		out = append(out, d.Name+"("+strings.Join(cids, ",")+")")
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func (e *env) join(d *device, cids ...string) {
	e.t.Helper()
	for _, cid := range cids {
		if _, err := d.c.JoinCluster(context.Background(), d.dev.ID, cid); err != nil {
			e.t.Fatalf("%s joins %s: %v", d.dev.Name, cid, err)
		}
	}
}

func TestOperatorRolePerAccount(t *testing.T) {
	e := newEnvOf(t, twoAccounts())
	ctx := context.Background()
	samA := e.newDevice("sam@example.com", "sam-acme")
	samB := e.newDevice("sam@example.com", "sam-beta")
	samAB := e.newDevice("sam@example.com", "sam-both")
	samNone := e.newDevice("sam@example.com", "sam-none")
	e.newDevice("amy@acme.example", "amy-none")
	e.join(samA, "ac1")
	e.join(samB, "bt1")
	e.join(samAB, "ac1", "bt1")
	ops := e.signIn("ops@acme.example")
	acme, beta := e.client(acmeToken), e.client(betaToken)

	me, err := ops.Me(ctx)
	if err != nil || !me.Operator || !slices.Equal(me.Operates, []string{"acme"}) || len(me.Accounts) != 2 {
		t.Errorf("ops@acme's me = %+v, %v; want operator of acme alone", me, err)
	}
	// Each account's operators see the devices in their clusters, with only
	// their clusters; sam-none joined nothing, so it is no one's but sam's
	// (amy's is acme's: she is in no other account).
	for _, c := range []struct {
		who  string
		c    *api.Client
		want string
	}{
		{"ops@acme", ops, "amy-none() sam-acme(ac1) sam-both(ac1)"},
		{"acme's token", acme, "amy-none() sam-acme(ac1) sam-both(ac1)"},
		{"beta's token", beta, "sam-beta(bt1) sam-both(bt1)"},
	} {
		if got := names(c.c.Devices(ctx, api.DeviceQuery{})); got != c.want {
			t.Errorf("%s's devices = %q, want %q", c.who, got, c.want)
		}
		if got := names(c.c.Devices(ctx, api.DeviceQuery{User: "sam@example.com"})); !strings.Contains(c.want, got) || strings.Contains(got, "amy") {
			t.Errorf("%s's devices of sam = %q", c.who, got)
		}
	}
	if got := names(samA.c.MyDevices(ctx)); got != "sam-acme(ac1) sam-beta(bt1) sam-both(ac1,bt1) sam-none()" {
		t.Errorf("sam's own devices = %q", got)
	}
	if got, err := acme.Device(ctx, samAB.dev.ID); err != nil || len(got.Clusters) != 1 || got.Clusters[0].CID != "ac1" {
		t.Errorf("acme's view of sam-both = %+v, %v; want ac1 alone", got, err)
	}

	// Neither the view nor the verbs of acme reach beta: 404, as for a
	// device that does not exist.
	before := e.version()
	for _, c := range []*api.Client{ops, acme} {
		for _, id := range []string{samB.dev.ID, samNone.dev.ID} {
			_, err := c.Device(ctx, id)
			wantCode(t, err, 404, api.CodeNotFound)
			_, err = c.RevokeDevice(ctx, id)
			wantCode(t, err, 404, api.CodeNotFound)
			wantCode(t, c.DeleteDevice(ctx, id), 404, api.CodeNotFound)
		}
		_, err = c.EndUserSession(ctx, samB.sessionID(t))
		wantCode(t, err, 404, api.CodeNotFound)
	}
	// ops@acme is a plain member of beta: no operator there.
	_, err = ops.Devices(ctx, api.DeviceQuery{AID: "beta"})
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = ops.Devices(ctx, api.DeviceQuery{CID: "bt1"})
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = ops.Sessions(ctx, "beta", "sam@example.com")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = ops.EndUserSessions(ctx, "beta", "sam@example.com")
	wantCode(t, err, 404, api.CodeNotFound)
	// The account-wide actions, which a rule of beta's policy could grant
	// its member, are refused as bt1's actions are: 403, naming the rule.
	_, err = ops.Audit(ctx, api.AuditQuery{AID: "beta"})
	if ae := wantCode(t, err, 403, api.CodeForbidden); !strings.Contains(ae.Message, "read-audit on account beta") {
		t.Errorf("ops@acme reading beta's log: %q", ae.Message)
	}
	_, err = ops.Audit(ctx, api.AuditQuery{CID: "bt1"})
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = ops.Tokens(ctx, "beta")
	wantCode(t, err, 403, api.CodeForbidden)
	if e.version() != before {
		t.Fatal("a refused request changed something")
	}

	// Sessions: acme sees and ends sam's sessions holding a device in ac1,
	// never the one whose device is in bt1 alone.
	ss, err := acme.Sessions(ctx, "", "sam@example.com")
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	want := []string{samA.sessionID(t), samAB.sessionID(t)}
	slices.Sort(want)
	if err != nil || !slices.Equal(ids, want) {
		t.Errorf("acme's sessions of sam = %v, %v; want %v", ids, err, want)
	}
	// sam-acme's session is acme's alone: ended. sam-both's is beta's too:
	// kept, sam-both out of ac1 only (access_scope.go).
	samASess, samABSess := samA.sessionID(t), samAB.sessionID(t)
	ended, err := acme.EndUserSessions(ctx, "", "sam@example.com")
	if err != nil || !slices.Equal(ended.Ended, []string{samASess}) || !slices.Equal(ended.Cut, []string{samABSess}) ||
		!slices.Contains(ended.Devices, samAB.dev.ID) {
		t.Fatalf("acme ends sam's sessions: %+v, %v", ended, err)
	}
	for _, d := range []*device{samB, samAB} {
		if _, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0); err != nil {
			t.Errorf("sam's %s after acme ended sam's sessions: %v", d.dev.Name, err)
		}
	}
	if got := names(beta.Devices(ctx, api.DeviceQuery{})); got != "sam-beta(bt1) sam-both(bt1)" {
		t.Errorf("beta's devices after acme ended sam's sessions = %q", got)
	}
	if got := names(acme.Devices(ctx, api.DeviceQuery{User: "sam@example.com"})); got != "sam-acme(ac1)" {
		t.Errorf("acme's devices of sam after it ended sam's sessions = %q; want sam-both out of ac1", got)
	}

	// Beta's operator revokes sam's beta device: acme's audit log does not
	// hear of it, beta's does.
	bea := e.signIn("bea@beta.example")
	e.expectEntries("acme", func() {
		e.expectEntries("beta", func() {
			if _, err := bea.RevokeDevice(ctx, samB.dev.ID); err != nil {
				t.Fatal(err)
			}
		}, audit.DeviceRevoked)
	})
	page, err := acme.Audit(ctx, api.AuditQuery{Kind: audit.DeviceRevoked})
	if err != nil || len(page.Entries) != 0 {
		t.Errorf("acme's audit of revocations = %+v, %v; want none", page, err)
	}
}

// TestOperatorSeesASharedSessionsOwnDevices: one sign-in holding a device
// in acme's cluster and one in beta's is acme's to see (it holds a device
// of acme's), listed with acme's device alone; acme's "end" takes acme's
// device out of ac1 and leaves the session (and sam's beta device) alone,
// recorded in acme's audit log only.
func TestOperatorSeesASharedSessionsOwnDevices(t *testing.T) {
	e := newEnvOf(t, twoAccounts())
	ctx := context.Background()
	inA := e.newDevice("sam@example.com", "sam-acme")
	inB, err := inA.c.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "sam-beta", OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	e.join(inA, "ac1")
	if _, err := inA.c.JoinCluster(ctx, inB.ID, "bt1"); err != nil {
		t.Fatal(err)
	}
	acme := e.client(acmeToken)
	ss, err := acme.Sessions(ctx, "", "sam@example.com")
	if err != nil || len(ss) != 1 || !slices.Equal(ss[0].Devices, []string{inA.dev.ID}) {
		t.Fatalf("acme's sessions of sam = %+v, %v; want one, with %s alone", ss, err, inA.dev.ID)
	}
	e.expectEntries("beta", func() {
		e.expectEntries("acme", func() {
			out, err := acme.EndUserSession(ctx, ss[0].ID)
			if err != nil || len(out.Ended) != 0 || !slices.Equal(out.Cut, []string{ss[0].ID}) || !slices.Equal(out.Devices, []string{inA.dev.ID}) {
				t.Fatalf("acme ends the shared session: %+v, %v", out, err)
			}
		}, audit.SessionEnded)
	})
	if _, err := inA.c.DeviceMap(ctx, inB.ID, 0, 0); err != nil {
		t.Errorf("sam's beta device after acme's end: %v", err)
	}
	if got, err := e.client(betaToken).Device(ctx, inB.ID); err != nil || got.State != api.DeviceActive {
		t.Errorf("beta's view of sam-beta after acme's end = %+v, %v; want active", got, err)
	}
	_, err = acme.Device(ctx, inA.dev.ID)
	wantCode(t, err, 404, api.CodeNotFound) // out of ac1, sam-acme is in none of acme's clusters, and sam is beta's too
}

// TestOperatorRevokesASharedDevice: a device in acme's cluster and in
// beta's, revoked by acme's operator, leaves ac1 only: its key and session
// stay for beta, and beta's audit log does not hear of it. A device in
// acme's clusters alone is revoked whole, as before.
func TestOperatorRevokesASharedDevice(t *testing.T) {
	e := newEnvOf(t, twoAccounts())
	ctx := context.Background()
	both := e.newDevice("sam@example.com", "sam-both")
	onlyA := e.newDevice("sam@example.com", "sam-acme")
	e.join(both, "ac1", "bt1")
	e.join(onlyA, "ac1")
	acme, beta := e.client(acmeToken), e.client(betaToken)
	e.expectEntries("beta", func() {
		e.expectEntries("acme", func() {
			got, err := acme.RevokeDevice(ctx, both.dev.ID)
			if err != nil || got.State == api.DeviceRevoked || len(got.Clusters) != 0 {
				t.Fatalf("acme revokes sam-both: %+v, %v; want it out of ac1, not revoked", got, err)
			}
		}, audit.DeviceRevoked)
	})
	if _, err := both.c.DeviceMap(ctx, both.dev.ID, 0, 0); err != nil {
		t.Errorf("sam-both's map after acme's revoke: %v", err)
	}
	if got, err := beta.Device(ctx, both.dev.ID); err != nil || got.State != api.DeviceActive || len(got.Clusters) != 1 || got.Clusters[0].CID != "bt1" {
		t.Errorf("beta's view of sam-both after acme's revoke = %+v, %v; want active in bt1", got, err)
	}
	_, err := acme.Device(ctx, both.dev.ID)
	wantCode(t, err, 404, api.CodeNotFound)

	got, err := acme.RevokeDevice(ctx, onlyA.dev.ID)
	if err != nil || got.State != api.DeviceRevoked {
		t.Fatalf("acme revokes sam-acme: %+v, %v; want revoked", got, err)
	}
	// Each device here has its own sign-in: sam-both's is untouched.
	if _, err := both.c.DeviceMap(ctx, both.dev.ID, 0, 0); err != nil {
		t.Errorf("sam-both's map after sam-acme was revoked: %v", err)
	}
}
