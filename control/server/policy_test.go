package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/hub"
)

const oncallPolicy = `# who may reach what
version 2

allow group:oncall -> *: *
allow * -> ky3: 10.96.0.20:5432
`

func TestPolicyIsForOperators(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bob := e.signIn("bob@example.com")
	_, err := bob.Policy(ctx, "rjwrn")
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.SetPolicy(ctx, "rjwrn", oncallPolicy)
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.TestPolicy(ctx, "rjwrn", api.PolicyTestRequest{User: "bob@example.com", To: "ky3"})
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.Groups(ctx, "rjwrn")
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.CreateGroup(ctx, "rjwrn", "oncall")
	wantCode(t, err, 403, api.CodeForbidden)
	// Another account's operator does not learn of this one.
	_, err = e.client(otherToken).Policy(ctx, "rjwrn")
	wantCode(t, err, 404, api.CodeNotFound)
	// No policy yet: an empty document, and everyone may connect.
	p, err := e.op.Policy(ctx, "rjwrn")
	if err != nil || p.Version != 0 || p.Document != "" {
		t.Fatalf("policy before any = %+v, %v", p, err)
	}
	d, err := e.op.TestPolicy(ctx, "rjwrn", api.PolicyTestRequest{User: "bob@example.com", To: "xym"})
	if err != nil || !d.Allow || d.Line != 0 || !strings.Contains(d.Reason, "no policy") {
		t.Fatalf("test without a policy = %+v, %v", d, err)
	}
}

func TestSetPolicyValidatesAndRefusesReplays(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ada := e.signIn("ada@example.com")
	// Unknown group and cluster: 400 naming each line, nothing set.
	bad := "version 1\nallow group:oncall -> ky3: *\nallow * -> nope: *\n"
	e.expectEntries("rjwrn", func() {
		_, err := ada.SetPolicy(ctx, "rjwrn", bad)
		ae := wantCode(t, err, 400, api.CodePolicyInvalid)
		if len(ae.Details) != 2 || !strings.HasPrefix(ae.Details[0], "policy line 2: unknown group \"oncall\"") ||
			!strings.HasPrefix(ae.Details[1], "policy line 3: unknown cluster \"nope\"") || !strings.Contains(ae.Message, "line 2") {
			t.Fatalf("invalid policy: %q %q", ae.Message, ae.Details)
		}
		_, err = ada.SetPolicy(ctx, "rjwrn", "version 1\nallow * -> ky3: 10.96.0.300\n")
		ae = wantCode(t, err, 400, api.CodePolicyInvalid)
		if !strings.Contains(ae.Message, "policy line 2") {
			t.Fatalf("malformed address: %q", ae.Message)
		}
	})
	if _, err := ada.CreateGroup(ctx, "rjwrn", "oncall"); err != nil {
		t.Fatal(err)
	}
	topic := e.srv.hub.Topic(hub.Policy("rjwrn"))
	before := topic.Version()
	var set *api.Policy
	en := e.expectEntries("rjwrn", func() {
		var err error
		if set, err = ada.SetPolicy(ctx, "rjwrn", oncallPolicy); err != nil {
			t.Fatal(err)
		}
	}, audit.PolicySet)
	if set.Version != 2 || set.Document != oncallPolicy || set.SetBy != "ada@example.com" || en[0].Target != "rjwrn" ||
		en[0].Outcome != "policy version 2 set: 0 group(s), 2 rule(s)" || topic.Version() <= before {
		t.Fatalf("set = %+v, entry %+v, topic %d→%d", set, en[0], before, topic.Version())
	}
	// A replay of the same or an older version: 409, nothing changed.
	e.expectEntries("rjwrn", func() {
		for _, doc := range []string{oncallPolicy, strings.Replace(oncallPolicy, "version 2", "version 1", 1)} {
			_, err := e.op.SetPolicy(ctx, "rjwrn", doc)
			ae := wantCode(t, err, 409, api.CodeConflict)
			if !strings.Contains(ae.Message, "not newer than version 2") {
				t.Fatalf("replay: %q", ae.Message)
			}
		}
	})
	got, err := e.op.Policy(ctx, "rjwrn")
	if err != nil || got.Version != 2 || got.Document != oncallPolicy {
		t.Fatalf("policy after replays = %+v, %v", got, err)
	}
}

func TestPolicyTest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.op.CreateGroup(ctx, "rjwrn", "oncall"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.AddGroupMember(ctx, "rjwrn", "oncall", "Ada@Example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.SetPolicy(ctx, "rjwrn", oncallPolicy); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, to string
		allow    bool
		line     int
	}{
		{"ada@example.com", "xym", true, 4},
		{"bob@example.com", "xym", false, 0},
		{"bob@example.com", "ky3", true, 5},
		{"bob@example.com", "ky3:10.96.0.20:5432", true, 5},
		{"bob@example.com", "ky3:10.96.0.20:22", false, 0},
	} {
		d, err := e.op.TestPolicy(ctx, "rjwrn", api.PolicyTestRequest{User: c.user, To: c.to})
		if err != nil || d.Allow != c.allow || d.Line != c.line || d.Reason == "" || (c.line != 0) != (d.Rule != "") {
			t.Errorf("%s → %s = %+v, %v; want allow %v by line %d", c.user, c.to, d, err, c.allow, c.line)
		}
	}
	_, err := e.op.TestPolicy(ctx, "rjwrn", api.PolicyTestRequest{User: "eve@example.com", To: "ky3"})
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = e.op.TestPolicy(ctx, "rjwrn", api.PolicyTestRequest{User: "bob@example.com", To: "zzz"})
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = e.op.TestPolicy(ctx, "rjwrn", api.PolicyTestRequest{User: "bob@example.com", To: "ky3:10.96.0.20:99999"})
	wantCode(t, err, 400, api.CodeInvalid)
}

func TestGroups(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.expectEntries("rjwrn", func() {
		if _, err := e.op.CreateGroup(ctx, "rjwrn", "oncall"); err != nil {
			t.Fatal(err)
		}
		g, err := e.op.AddGroupMember(ctx, "rjwrn", "oncall", "Bob@Example.com")
		if err != nil || g.Name != "oncall" || !slices.Equal(g.Members, []string{"bob@example.com"}) {
			t.Fatalf("add = %+v, %v", g, err)
		}
	}, audit.GroupChanged, audit.GroupChanged)
	e.expectEntries("rjwrn", func() {
		_, err := e.op.CreateGroup(ctx, "rjwrn", "oncall")
		wantCode(t, err, 409, api.CodeConflict)
		_, err = e.op.CreateGroup(ctx, "rjwrn", "on call")
		wantCode(t, err, 400, api.CodeInvalid)
		_, err = e.op.AddGroupMember(ctx, "rjwrn", "nope", "bob@example.com")
		wantCode(t, err, 404, api.CodeNotFound)
		_, err = e.op.AddGroupMember(ctx, "rjwrn", "oncall", "bob@example.com")
		wantCode(t, err, 409, api.CodeConflict)
		_, err = e.op.AddGroupMember(ctx, "rjwrn", "oncall", "not-an-email")
		wantCode(t, err, 400, api.CodeInvalid)
		_, err = e.op.RemoveGroupMember(ctx, "rjwrn", "oncall", "ada@example.com")
		wantCode(t, err, 404, api.CodeNotFound)
	})
	gs, err := e.op.Groups(ctx, "rjwrn")
	if err != nil || len(gs) != 1 || gs[0].Name != "oncall" || !slices.Equal(gs[0].Members, []string{"bob@example.com"}) {
		t.Fatalf("groups = %+v, %v", gs, err)
	}
	g, err := e.op.RemoveGroupMember(ctx, "rjwrn", "oncall", "bob@example.com")
	if err != nil || len(g.Members) != 0 {
		t.Fatalf("remove = %+v, %v", g, err)
	}
}

// TestJoinRefusedByPolicy: a user whose groups may not connect to a
// cluster gets a clear refusal naming it and what to ask for; the refusal
// is audited though the join rolled back; a member of the group joins.
func TestJoinRefusedByPolicy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.op.CreateGroup(ctx, "rjwrn", "oncall"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.SetPolicy(ctx, "rjwrn", "version 1\nallow group:oncall -> xym: *\nallow * -> ky3: *\n"); err != nil {
		t.Fatal(err)
	}
	bob := e.newDevice("bob@example.com", "laptop")
	en := e.expectEntries("rjwrn", func() {
		_, err := bob.c.JoinCluster(ctx, bob.dev.ID, "xym")
		ae := wantCode(t, err, 403, api.CodeForbidden)
		if !strings.Contains(ae.Message, "does not let bob@example.com (in no group) connect to xym") ||
			!strings.Contains(ae.Hint, "ask an operator of rjwrn to add you to a group that may connect to xym") {
			t.Fatalf("refusal: %q (%q)", ae.Message, ae.Hint)
		}
	}, audit.JoinRefused)
	if en[0].CID != "xym" || en[0].Target != bob.dev.ID || en[0].Actor.Name != "bob@example.com" {
		t.Fatalf("entry = %+v", en[0])
	}
	if cs, err := e.op.Device(ctx, bob.dev.ID); err != nil || len(cs.Clusters) != 0 {
		t.Fatalf("device after the refusal = %+v, %v (joined nothing)", cs, err)
	}
	if _, err := bob.c.JoinCluster(ctx, bob.dev.ID, "ky3"); err != nil {
		t.Fatalf("ky3 is for everyone: %v", err)
	}
	if _, err := e.op.AddGroupMember(ctx, "rjwrn", "oncall", "bob@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.c.JoinCluster(ctx, bob.dev.ID, "xym"); err != nil {
		t.Fatalf("a member of oncall: %v", err)
	}
}

// TestGatewayMapCarriesPolicy: a serving gateway's map holds the document
// and each peer's user and groups, and a policy or group change wakes its
// long-poll.
func TestGatewayMapCarriesPolicy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bob := e.newDevice("bob@example.com", "laptop")
	if _, err := bob.c.JoinCluster(ctx, bob.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	gw := e.gateway("ky3", "n1")
	m, err := gw.GatewayMap(ctx, 0, 0)
	if err != nil || m.Serve == nil || m.Serve.Policy != "" || len(m.Serve.Peers) != 1 || m.Serve.Peers[0].User != "" {
		t.Fatalf("map without a policy = %+v, %v", m.Serve, err)
	}
	if _, err := e.op.CreateGroup(ctx, "rjwrn", "oncall"); err != nil {
		t.Fatal(err)
	}
	m, _ = gw.GatewayMap(ctx, 0, 0)
	doc := "version 1\nallow group:oncall -> ky3: *\n"
	c := poll(func() (*api.GatewayMap, error) { return gw.GatewayMap(ctx, m.Version, time.Minute) })
	e.waitWatchers(1)
	if _, err := e.op.SetPolicy(ctx, "rjwrn", doc); err != nil {
		t.Fatal(err)
	}
	m, err = recv(t, c)
	if err != nil || m.Serve.Policy != doc || m.Serve.Peers[0].User != "bob@example.com" || len(m.Serve.Peers[0].Groups) != 0 {
		t.Fatalf("map after the policy = %+v, %v", m.Serve, err)
	}
	c = poll(func() (*api.GatewayMap, error) { return gw.GatewayMap(ctx, m.Version, time.Minute) })
	e.waitWatchers(1)
	if _, err := e.op.AddGroupMember(ctx, "rjwrn", "oncall", "bob@example.com"); err != nil {
		t.Fatal(err)
	}
	m, err = recv(t, c)
	if err != nil || !slices.Equal(m.Serve.Peers[0].Groups, []string{"oncall"}) {
		t.Fatalf("map after bob joined oncall = %+v, %v", m.Serve, err)
	}
}
