package server

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/store"
)

// grantsPolicy gives helpdesk (bob) every account-wide action and oncall
// (a group of the store: fay) one action on ky3.
const grantsPolicy = `version 1
group helpdesk: bob@example.com
allow * -> *: *
operate group:helpdesk -> *: manage-users, manage-tokens, set-policy, read-audit
operate group:oncall -> ky3: move-services
`

// grantsEnv: testWorld with cal (granted nothing), dan, fay and gus in
// rjwrn; groups oncall (fay) and contractors (gus); an operator token
// named ci; grantsPolicy in force.
func grantsEnv(t *testing.T) *env {
	t.Helper()
	w := testWorld()
	for _, u := range []string{"cal", "dan", "fay", "gus"} {
		w.Users = append(w.Users, api.WorldUser{Email: u + "@example.com", Password: password, Accounts: []string{"rjwrn"}})
	}
	e := newEnvOf(t, w)
	ctx := context.Background()
	for _, g := range [][2]string{{"oncall", "fay@example.com"}, {"contractors", "gus@example.com"}} {
		if _, err := e.op.CreateGroup(ctx, "rjwrn", g[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := e.op.AddGroupMember(ctx, "rjwrn", g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.signIn("ada@example.com").CreateToken(ctx, api.CreateTokenRequest{Name: "ci"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.SetPolicy(ctx, "rjwrn", grantsPolicy); err != nil {
		t.Fatal(err)
	}
	return e
}

// accountAct is one request of an account-wide action on rjwrn.
type accountAct struct {
	action string
	do     func(context.Context, *api.Client) error
}

func accountActs() []accountAct {
	ok := func(_ any, err error) error { return err }
	return []accountAct{
		{"manage-users", func(ctx context.Context, c *api.Client) error { return ok(c.Users(ctx, "rjwrn")) }},
		{"manage-users", func(ctx context.Context, c *api.Client) error {
			return ok(c.RemoveUser(ctx, "rjwrn", "dan@example.com"))
		}},
		{"manage-users", func(ctx context.Context, c *api.Client) error { return ok(c.Groups(ctx, "rjwrn")) }},
		{"manage-users", func(ctx context.Context, c *api.Client) error { return ok(c.CreateGroup(ctx, "rjwrn", "support")) }},
		{"manage-users", func(ctx context.Context, c *api.Client) error {
			return ok(c.AddGroupMember(ctx, "rjwrn", "contractors", "cal@example.com"))
		}},
		{"manage-users", func(ctx context.Context, c *api.Client) error {
			return ok(c.RemoveGroupMember(ctx, "rjwrn", "contractors", "gus@example.com"))
		}},
		{"manage-tokens", func(ctx context.Context, c *api.Client) error { return ok(c.Tokens(ctx, "rjwrn")) }},
		{"manage-tokens", func(ctx context.Context, c *api.Client) error { return ok(c.RevokeToken(ctx, "rjwrn", "ci")) }},
		{"set-policy", func(ctx context.Context, c *api.Client) error { return ok(c.Policy(ctx, "rjwrn")) }},
		{"set-policy", func(ctx context.Context, c *api.Client) error {
			return ok(c.SetPolicy(ctx, "rjwrn", strings.Replace(grantsPolicy, "version 1", "version 2", 1)))
		}},
		{"set-policy", func(ctx context.Context, c *api.Client) error {
			return ok(c.TestPolicy(ctx, "rjwrn", api.PolicyTestRequest{User: "cal@example.com", To: "ky3"}))
		}},
		{"read-audit", func(ctx context.Context, c *api.Client) error { return ok(c.Audit(ctx, api.AuditQuery{AID: "rjwrn"})) }},
		{"read-audit", func(ctx context.Context, c *api.Client) error { return ok(c.Audit(ctx, api.AuditQuery{CID: "ky3"})) }},
	}
}

// Every account-wide action is granted by an `operate … -> *:` rule:
// bob (helpdesk) uses each; cal, in the account with no rule, is refused
// each with a 403 naming the action, the account and the rule, and
// changes nothing; eve, of another account, is told of no rjwrn (404).
func TestOperateRuleGrantsAccountWideActions(t *testing.T) {
	e := grantsEnv(t)
	ctx := context.Background()
	bob, cal, eve := e.signIn("bob@example.com"), e.signIn("cal@example.com"), e.signIn("eve@example.com")
	before := e.version()
	for i, a := range accountActs() {
		err := a.do(ctx, cal)
		want := a.action + " on account rjwrn needs the operator role there, its operator token, or an `operate … -> *: " + a.action +
			"` rule in its policy: no rule lets cal@example.com (in no group) " + a.action
		if ae := wantCode(t, err, 403, api.CodeForbidden); ae.Message != want || ae.Hint == "" {
			t.Errorf("%d: cal's %s: %q, want %q", i, a.action, ae.Message, want)
		}
		err = a.do(ctx, eve)
		if ae := wantCode(t, err, 404, api.CodeNotFound); !strings.Contains(ae.Message, "among your") {
			t.Errorf("%d: eve's %s: %q", i, a.action, ae.Message)
		}
	}
	if v := e.version(); v != before {
		t.Fatalf("the refusals changed the store: version %d → %d", before, v)
	}
	for i, a := range accountActs() {
		if err := a.do(ctx, bob); err != nil {
			t.Errorf("%d: bob, granted %s, is refused: %v", i, a.action, err)
		}
	}
	// What bob did is his, in the log.
	page, err := e.op.Audit(ctx, api.AuditQuery{Actor: "bob@example.com"})
	var kinds []string
	for _, en := range page.Entries {
		kinds = append(kinds, en.Kind)
	}
	want := []string{audit.PolicySet, audit.TokenRevoked, audit.GroupChanged, audit.GroupChanged, audit.GroupChanged, audit.UserRemoved, audit.SignedIn}
	if err != nil || !slices.Equal(kinds, want) {
		t.Fatalf("bob's entries = %q, %v; want %q", kinds, err, want)
	}
	if ks, err := e.op.Tokens(ctx, ""); err != nil || !slices.ContainsFunc(ks, func(k api.APIToken) bool { return k.Name == "ci" && k.RevokedBy == "bob@example.com" }) {
		t.Errorf("tokens after bob's revoke = %+v, %v", ks, err)
	}
	// Without aid, the one account where bob may.
	if _, err := bob.Tokens(ctx, ""); err != nil {
		t.Errorf("bob's tokens without aid: %v", err)
	}
	if _, err := bob.Audit(ctx, api.AuditQuery{}); err != nil {
		t.Errorf("bob's log without aid: %v", err)
	}
}

// /v1/me tells a user what the rules grant them, account by account; an
// operator's role holds it all and lists nothing.
func TestMeSaysWhatRulesGrant(t *testing.T) {
	e := grantsEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		who  string
		want []string
	}{
		{"bob@example.com", []string{"manage-users", "manage-tokens", "set-policy", "read-audit"}},
		{"cal@example.com", nil},
		{"fay@example.com", nil}, // move-services on ky3: not account-wide
		{"ada@example.com", nil},
	} {
		me, err := e.signIn(c.who).Me(ctx)
		if err != nil || !slices.Equal(me.May["rjwrn"], c.want) || (c.want == nil) != (me.May == nil) {
			t.Errorf("%s: may = %v, %v; want rjwrn: %v", c.who, me.May, err, c.want)
		}
	}
}

// A grant by a rule is narrower than the role: it creates no operator
// token, removes no one who holds operator actions (the role, a rule),
// and changes the members of no group an operate rule names. Each
// refusal says so and changes nothing; an operator does each.
func TestRuleGrantsStopShortOfTheRole(t *testing.T) {
	e := grantsEnv(t)
	ctx := context.Background()
	bob, ada := e.signIn("bob@example.com"), e.signIn("ada@example.com")
	before := e.version()
	for _, c := range []struct {
		name, saying string
		do           func(*api.Client) error
	}{
		{"create a token", "creating an operator token needs the operator role on account rjwrn", func(c *api.Client) error {
			_, err := c.CreateToken(ctx, api.CreateTokenRequest{Name: "mine", AID: "rjwrn"})
			return err
		}},
		{"create a token without aid", "creating an operator token needs the operator role on an account", func(c *api.Client) error {
			_, err := c.CreateToken(ctx, api.CreateTokenRequest{Name: "mine2"})
			return err
		}},
		{"remove an operator", "they are an operator of it", func(c *api.Client) error {
			_, err := c.RemoveUser(ctx, "rjwrn", "ada@example.com")
			return err
		}},
		{"remove a rule's grantee", "line 5 of its policy (operate group:oncall -> ky3: move-services) grants them operator actions", func(c *api.Client) error {
			_, err := c.RemoveUser(ctx, "rjwrn", "fay@example.com")
			return err
		}},
		{"join a group an operate rule names", "changing the members of group oncall of rjwrn needs the operator role there: line 5", func(c *api.Client) error {
			_, err := c.AddGroupMember(ctx, "rjwrn", "oncall", "bob@example.com")
			return err
		}},
		{"leave someone out of it", "changing the members of group oncall", func(c *api.Client) error {
			_, err := c.RemoveGroupMember(ctx, "rjwrn", "oncall", "fay@example.com")
			return err
		}},
	} {
		if ae := wantCode(t, c.do(bob), 403, api.CodeForbidden); !strings.Contains(ae.Message, c.saying) {
			t.Errorf("bob may not %s: %q, want it to say %q", c.name, ae.Message, c.saying)
		}
	}
	if v := e.version(); v != before {
		t.Fatalf("the refusals changed the store: version %d → %d", before, v)
	}
	if _, err := ada.CreateToken(ctx, api.CreateTokenRequest{Name: "mine"}); err != nil {
		t.Errorf("the operator creates a token: %v", err)
	}
	if _, err := ada.RemoveGroupMember(ctx, "rjwrn", "oncall", "fay@example.com"); err != nil {
		t.Errorf("the operator changes oncall: %v", err)
	}
	// Out of oncall, fay holds nothing: bob may remove her now.
	if _, err := bob.RemoveUser(ctx, "rjwrn", "fay@example.com"); err != nil {
		t.Errorf("bob removes fay, who holds no operator action: %v", err)
	}
}

// Of a user in several accounts, an action without aid is about the one
// account where they may use it; two such accounts need aid; a listing
// (the log) reads every such account. A user in no account is refused.
func TestAccountWideActionsAcrossAccounts(t *testing.T) {
	e := newEnvOf(t, twoAccounts())
	ctx := context.Background()
	sam := e.signIn("sam@example.com") // in acme and beta
	grant := func(tok, aid, actions string) {
		t.Helper()
		if _, err := e.client(tok).SetPolicy(ctx, aid, "version 1\noperate user:sam@example.com -> *: "+actions+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := sam.Tokens(ctx, "")
	if ae := wantCode(t, err, 403, api.CodeForbidden); !strings.Contains(ae.Message, "none of your accounts (acme, beta) grants it to sam@example.com") {
		t.Errorf("sam, granted nothing: %q", ae.Message)
	}
	grant(acmeToken, "acme", "read-audit, manage-tokens")
	if ks, err := sam.Tokens(ctx, ""); err != nil || len(ks) != 1 || ks[0].AID != "acme" {
		t.Errorf("sam's tokens without aid = %+v, %v; want acme's", ks, err)
	}
	_, err = sam.Tokens(ctx, "beta")
	wantCode(t, err, 403, api.CodeForbidden)
	grant(betaToken, "beta", "read-audit, manage-tokens")
	_, err = sam.Tokens(ctx, "")
	if ae := wantCode(t, err, 400, api.CodeInvalid); !strings.Contains(ae.Message, "several accounts (acme, beta)") {
		t.Errorf("sam, granted in both: %q", ae.Message)
	}
	page, err := sam.Audit(ctx, api.AuditQuery{Kind: "policy"})
	if err != nil || len(page.Entries) != 2 {
		t.Errorf("sam's log of both accounts = %+v, %v; want both policies set", page, err)
	}

	if _, err := e.st.Update(ctx, func(tx store.Writer) error { return tx.RemoveUserFromAccount("acme", "amy@acme.example") }); err != nil {
		t.Fatal(err)
	}
	amy := e.signIn("amy@acme.example")
	_, err = amy.Users(ctx, "acme")
	if ae := wantCode(t, err, 403, api.CodeForbidden); !strings.Contains(ae.Message, "amy@acme.example belongs to no account") {
		t.Errorf("amy, in no account: %q", ae.Message)
	}
}
