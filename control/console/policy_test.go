package console_test

import (
	"context"
	"html"
	"net/url"
	"strings"
	"testing"

	"github.com/runos/vpn/control/controltest"
)

// TestOperatorEditsPolicy (issue 23): an operator sees the account's
// access policy and saves a new version from the console; a bad document
// is refused naming its line, a replay of the version and a form without
// its CSRF token change nothing, and a user who is no operator sees no
// policy and cannot set one.
func TestOperatorEditsPolicy(t *testing.T) {
	ctl := controltest.Start(t)
	ops := newBrowser(t, ctl)
	page := ops.signIn("ops@rjwrn.example.com").body
	for _, want := range []string{"Access policy", `action="/console/accounts/rjwrn/policy"`, "rjwrn has no policy", `<textarea id="policy-rjwrn" name="document"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	form := inputs(t, page)
	post := func(b *browser, form url.Values, doc string) answer {
		t.Helper()
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Set("document", doc)
		return b.do("POST", "/console/accounts/rjwrn/policy", f, nil)
	}
	version := func() uint64 {
		t.Helper()
		p, err := ctl.API(controltest.OperatorToken).Policy(context.Background(), "rjwrn")
		if err != nil {
			t.Fatal(err)
		}
		return p.Version
	}

	if a := post(ops, form, "version 1\nallow group:nobody -> ky3: *\n"); a.status != 400 || !strings.Contains(a.body, "line 2") {
		t.Errorf("a policy naming an unknown group: %d %s", a.status, a.body)
	}
	if a := post(ops, url.Values{}, "version 1\nallow * -> ky3: *\n"); a.status != 403 {
		t.Errorf("no CSRF token: %d", a.status)
	}
	if v := version(); v != 0 {
		t.Fatalf("refused forms set version %d", v)
	}
	doc := "version 1\nallow * -> ky3: *\n"
	if a := post(ops, form, doc); a.status != 303 || a.loc != "/console" {
		t.Fatalf("save: %d %q %s", a.status, a.loc, a.body)
	}
	if v := version(); v != 1 {
		t.Fatalf("after save: version %d", v)
	}
	page = ops.do("GET", "/console", nil, nil).body
	if !strings.Contains(page, "Version 1 of rjwrn, set by ops@rjwrn.example.com") || !strings.Contains(page, html.EscapeString("allow * -> ky3: *")) {
		t.Errorf("the page does not show version 1 and its rules:\n%s", page)
	}
	if a := post(ops, form, doc); a.status != 409 {
		t.Errorf("the same version again: %d %s", a.status, a.body)
	}

	dev := newBrowser(t, ctl)
	page = dev.signIn("dev@rjwrn.example.com").body
	if strings.Contains(page, "Access policy") || strings.Contains(page, "/policy") {
		t.Error("a user who is no operator is shown the policy")
	}
	if a := post(dev, inputs(t, page), "version 2\nallow * -> *: *\n"); a.status != 403 {
		t.Errorf("a user setting the policy: %d %s", a.status, a.body)
	}
	if v := version(); v != 1 {
		t.Errorf("after the user's try: version %d", v)
	}
}
