package console_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/controltest"
)

// TestOperatorRemovesUser (issue 23): an operator sees the account's users
// with a Remove button for each but themselves; removing one ends their
// session and removes their device at once, is in the audit log and goes
// from the page. A form without its CSRF token, or from a user who is no
// operator, removes nobody.
func TestOperatorRemovesUser(t *testing.T) {
	ctl := controltest.Start(t)
	ctx := context.Background()
	op := ctl.API(controltest.OperatorToken)
	devTok := ctl.SignIn(t, "dev@rjwrn.example.com")
	d := laptop(t, ctl, "dev@rjwrn.example.com", "dev-laptop")
	ops := newBrowser(t, ctl)
	page := ops.signIn("ops@rjwrn.example.com").body
	action := "/console/accounts/rjwrn/users/dev@rjwrn.example.com/remove"
	for _, want := range []string{`<h2 id="users-title">Users</h2>`, `action="` + action + `"`,
		`aria-label="Remove dev@rjwrn.example.com from rjwrn"`, `<td data-label="User">ops@rjwrn.example.com</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "/console/accounts/rjwrn/users/ops@rjwrn.example.com/remove") {
		t.Error("the operator is offered to remove themselves")
	}
	form := inputs(t, page)
	users := func() int {
		t.Helper()
		us, err := op.Users(ctx, "rjwrn")
		if err != nil {
			t.Fatal(err)
		}
		return len(us)
	}

	if a := ops.do("POST", action, url.Values{}, nil); a.status != 403 {
		t.Errorf("no CSRF token: %d", a.status)
	}
	dev := newBrowser(t, ctl)
	if a := dev.do("POST", action, inputs(t, dev.signIn("dev@rjwrn.example.com").body), nil); a.status != 403 {
		t.Errorf("a user who is no operator: %d %s", a.status, a.body)
	}
	if a := ops.do("POST", "/console/accounts/rjwrn/users/nobody@rjwrn.example.com/remove", form, map[string]string{"Accept": "application/json"}); a.status != 404 || !strings.Contains(a.body, "no user nobody@rjwrn.example.com in rjwrn") {
		t.Errorf("no such user: %d %s", a.status, a.body)
	}
	if n := users(); n != 2 {
		t.Fatalf("refused forms removed a user: %d left", n)
	}

	a := ops.do("POST", action, form, map[string]string{"Accept": "application/json"})
	if a.status != 200 || !strings.Contains(a.body, "Removed dev@rjwrn.example.com from rjwrn") {
		t.Fatalf("remove: %d %s", a.status, a.body)
	}
	if n := users(); n != 1 {
		t.Errorf("users after the removal: %d, want 1", n)
	}
	if _, err := ctl.API(devTok).Me(ctx); !api.IsCode(err, api.CodeUnauthorized) {
		t.Errorf("the removed user's session: %v, want ended", err)
	}
	if _, err := op.Device(ctx, d.ID); !api.IsCode(err, api.CodeNotFound) {
		t.Errorf("the removed user's device: %v, want gone", err)
	}
	page = ops.do("GET", "/console", nil, nil).body
	if strings.Contains(page, action) || strings.Contains(page, `data-device="`+d.ID+`"`) {
		t.Error("the removed user or their device is still on the page")
	}
	if !strings.Contains(page, "user.removed") {
		t.Error("the removal is not in the latest changes")
	}
}
