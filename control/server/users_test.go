package server

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/oidc"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/seed"
	"github.com/runos/vpn/control/store"
)

// Removing a user ends their access at once: the gateway's long-poll
// wakes without their device, their daemon is told why, their groups and
// password go, one entry is written; every refusal before changes nothing.
func TestRemoveUser(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bob := e.newDevice("bob@example.com", "bob-laptop")
	if _, err := bob.c.JoinCluster(ctx, bob.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	m := e.serve("ky3", "n1", newKey(t))
	if len(m.Serve.Peers) != 1 {
		t.Fatalf("peers before = %+v", m.Serve.Peers)
	}
	if _, err := e.op.CreateGroup(ctx, "rjwrn", "oncall"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.AddGroupMember(ctx, "rjwrn", "oncall", "bob@example.com"); err != nil {
		t.Fatal(err)
	}
	us, err := e.op.Users(ctx, "rjwrn")
	want := []api.User{{Email: "ada@example.com", Operator: true, Groups: []string{}, Password: true},
		{Email: "bob@example.com", Groups: []string{"oncall"}, Password: true}}
	if err != nil || !slices.EqualFunc(us, want, sameUser) {
		t.Fatalf("users = %+v, %v; want %+v", us, err, want)
	}

	ada := e.signIn("ada@example.com")
	before := e.version()
	for _, c := range []struct {
		name         string
		c            *api.Client
		aid, email   string
		status       int
		code, saying string
	}{
		{"a user who is no operator", bob.c, "rjwrn", "ada@example.com", 403, api.CodeForbidden, "operator"},
		{"another account's operator", e.client(otherToken), "rjwrn", "bob@example.com", 404, api.CodeNotFound, "no account rjwrn"},
		{"another account's user", e.op, "rjwrn", "eve@example.com", 404, api.CodeNotFound, "no user eve@example.com in rjwrn"},
		{"a user of no account", e.op, "rjwrn", "nobody@example.com", 404, api.CodeNotFound, "no user nobody@example.com"},
		{"the caller themselves", ada, "rjwrn", "ada@example.com", 409, api.CodeConflict, "yourself"},
		{"not an email", e.op, "rjwrn", "bob", 400, api.CodeInvalid, "user"},
	} {
		_, err := c.c.RemoveUser(ctx, c.aid, c.email)
		if ae := wantCode(t, err, c.status, c.code); !strings.Contains(ae.Error(), c.saying) {
			t.Errorf("%s: %v, want it to say %q", c.name, ae, c.saying)
		}
	}
	if v := e.version(); v != before {
		t.Fatalf("version after refusals = %d, want %d (nothing changed)", v, before)
	}
	if _, err := bob.c.DeviceMap(ctx, bob.dev.ID, 0, 0); err != nil {
		t.Fatalf("bob's map after the refusals: %v", err)
	}

	if m, err = e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); err != nil || len(m.Serve.Peers) != 1 {
		t.Fatalf("the gateway's map before = %+v, %v", m, err)
	}
	gw := poll(func() (*api.GatewayMap, error) {
		return e.gateway("ky3", "n1").GatewayMap(ctx, m.Version, 30*time.Second)
	})
	e.waitWatchers(1)
	sid := bob.sessionID(t)
	en := e.expectEntries("rjwrn", func() {
		out, err := e.op.RemoveUser(ctx, "rjwrn", "Bob@example.com")
		if err != nil || out.Email != "bob@example.com" || !slices.Equal(out.Sessions, []string{sid}) ||
			!slices.Equal(out.Devices, []string{bob.dev.ID}) || !slices.Equal(out.Groups, []string{"oncall"}) || out.Elsewhere {
			t.Fatalf("remove = %+v, %v", out, err)
		}
	}, audit.UserRemoved)
	if en[0].Target != "bob@example.com" || !strings.Contains(en[0].Outcome, sid) || !strings.Contains(en[0].Outcome, bob.dev.ID) {
		t.Errorf("entry = %+v", en[0])
	}
	got, err := recv(t, gw)
	if err != nil || got.Serve == nil || len(got.Serve.Peers) != 0 {
		t.Fatalf("the gateway's map after the removal = %+v, %v; want no peer", got, err)
	}
	_, err = bob.c.DeviceMap(ctx, bob.dev.ID, 0, 0)
	if ae := wantCode(t, err, 401, api.CodeUnauthorized); !strings.Contains(ae.Message, "removed you") {
		t.Errorf("bob's daemon is told %q, want why", ae.Message)
	}
	if us, err := e.op.Users(ctx, "rjwrn"); err != nil || len(us) != 1 || us[0].Email != "ada@example.com" {
		t.Errorf("users after = %+v, %v", us, err)
	}
	if gs, err := e.op.Groups(ctx, "rjwrn"); err != nil || len(gs[0].Members) != 0 {
		t.Errorf("groups after = %+v, %v", gs, err)
	}
	if ok, err := e.srv.CheckPassword(ctx, "bob@example.com", password); ok || err != nil {
		t.Errorf("bob's password after the removal: %v, %v; want refused", ok, err)
	}
	_, err = e.op.RemoveUser(ctx, "rjwrn", "bob@example.com")
	wantCode(t, err, 404, api.CodeNotFound)
	// A restart imports the world file again: bob, still in it, stays out.
	services, _ := pool.NewServices(netip.MustParsePrefix("100.100.0.0/16"))
	if _, err := seed.Import(ctx, e.st, testWorld(), seed.Options{Services: services, BcryptCost: bcrypt.MinCost, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if us, err := e.op.Users(ctx, "rjwrn"); err != nil || len(us) != 1 {
		t.Errorf("users after the world file's import again = %+v, %v; want ada only", us, err)
	}
}

func sameUser(a, b api.User) bool {
	return a.Email == b.Email && a.Operator == b.Operator && a.Password == b.Password && slices.Equal(a.Groups, b.Groups)
}

// A user of two accounts removed from one keeps their session and device
// for the other: the device only leaves the first's clusters, and may not
// join them again.
func TestRemoveUserOfTwoAccounts(t *testing.T) {
	w := testWorld()
	w.Users[1].Accounts = []string{"other", "rjwrn"} // bob
	w.Clusters[4].VPNService = &api.WorldVPNService{ID: "wg-zzz", NodeID: "n1"}
	e := newEnvOf(t, w)
	ctx := context.Background()
	bob := e.newDevice("bob@example.com", "bob-laptop")
	for _, cid := range []string{"ky3", "zzz"} {
		if _, err := bob.c.JoinCluster(ctx, bob.dev.ID, cid); err != nil {
			t.Fatal(err)
		}
	}
	out, err := e.op.RemoveUser(ctx, "rjwrn", "bob@example.com")
	if err != nil || !out.Elsewhere || len(out.Sessions) != 0 || len(out.Devices) != 0 || !slices.Equal(out.Cut, []string{bob.dev.ID}) {
		t.Fatalf("remove = %+v, %v", out, err)
	}
	m, err := bob.c.DeviceMap(ctx, bob.dev.ID, 0, 0)
	if err != nil || len(m.Clusters) != 1 || m.Clusters[0].CID != "zzz" {
		t.Fatalf("bob's map after = %+v, %v; want zzz only", m, err)
	}
	if _, err := bob.c.JoinCluster(ctx, bob.dev.ID, "ky3"); err == nil {
		t.Fatal("bob joined ky3 again after his removal from rjwrn")
	}
	if us, err := e.client(otherToken).Users(ctx, "other"); err != nil || len(us) != 2 {
		t.Errorf("other's users = %+v, %v; want eve and bob", us, err)
	}
}

// A user the provider signs in, removed, is created again at their next
// sign-in while the provider still lets them in: keeping them out is the
// provider's job (docs/internals.md).
func TestRemovedUserSignsInAgainThroughTheProvider(t *testing.T) {
	w := newIdPWorld(t)
	ctx := context.Background()
	email := w.signInThrough("cleo@example.com", "cleo-pw")
	c := w.signIn(email)
	if _, err := w.op.RemoveUser(ctx, "rjwrn", email); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Me(ctx); !api.IsCode(err, api.CodeUnauthorized) {
		t.Fatalf("the removed user's session: %v, want ended", err)
	}
	if _, err := w.srv.SignInIdentity(ctx, oidc.Identity{Subject: "cleo", Email: email, Groups: []string{"oncall"}}); err != nil {
		t.Fatalf("sign-in after the removal: %v", err)
	}
	us, err := w.op.Users(ctx, "rjwrn")
	if err != nil || !slices.ContainsFunc(us, func(u api.User) bool {
		return u.Email == email && slices.Equal(u.Groups, []string{"oncall"}) && !u.Password
	}) {
		t.Fatalf("users after signing in again = %+v, %v", us, err)
	}
}

// Reads of users and groups, counted by countingStore (resume_test.go).

func (r countingReader) User(email string) (model.User, error) {
	r.c.userReads.Add(1)
	return r.Reader.User(email)
}

func (r countingReader) Users(aid string) ([]model.User, error) {
	r.c.userReads.Add(1)
	return r.Reader.Users(aid)
}

func (r countingReader) UserGroups(aid, email string) ([]string, error) {
	r.c.userReads.Add(1)
	return r.Reader.UserGroups(aid, email)
}

func (r countingReader) Groups(aid string) ([]model.Group, error) {
	r.c.userReads.Add(1)
	return r.Reader.Groups(aid)
}

// Listing an account's users reads the store as often for 23 users as for
// 3 (it read each user's groups, one at a time), and still shows each
// user's groups.
func TestUsersListReadsDoNotGrowWithUsers(t *testing.T) {
	w := testWorld()
	var cs *countingStore
	e := newEnvOf(t, w, func(c *Config) {
		cs = &countingStore{Store: c.Store}
		c.Store = cs
	})
	ctx := context.Background()
	if _, err := e.op.CreateGroup(ctx, "rjwrn", "oncall"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.AddGroupMember(ctx, "rjwrn", "oncall", "BOB@example.com"); err != nil {
		t.Fatal(err)
	}
	reads := func() int64 {
		t.Helper()
		before := cs.userReads.Load()
		us, err := e.op.Users(ctx, "rjwrn")
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(us, func(u api.User) bool { return u.Email == "bob@example.com" }); i < 0 || !slices.Equal(us[i].Groups, []string{"oncall"}) {
			t.Fatalf("users = %+v; want bob in oncall", us)
		}
		return cs.userReads.Load() - before
	}
	few := reads()
	_, err := e.st.Update(ctx, func(tx store.Writer) error {
		for i := range 20 {
			if err := tx.PutUser(model.User{Email: fmt.Sprintf("u%d@example.com", i), Accounts: []string{"rjwrn"}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if many := reads(); many != few || few > 2 {
		t.Errorf("reads of a users list: %d for 3 users, %d for 23; want the same, at most 2", few, many)
	}
}
