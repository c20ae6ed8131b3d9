package console_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/runos/vpn/control/controltest"
)

// A user who is no operator but whom a rule of the policy grants
// account-wide actions sees the sections those actions are about, as the
// API decides them: manage-users the users (Remove for all but operators
// and themselves), set-policy the policy (and saves it), read-audit the
// latest changes; their own devices still, no Revoke.
func TestGrantedUserSeesWhatTheRuleGrants(t *testing.T) {
	ctl := controltest.Start(t)
	ctx := context.Background()
	op := ctl.API(controltest.OperatorToken)
	doc := "version 1\nallow * -> *: *\noperate user:dev@rjwrn.example.com -> *: manage-users, set-policy\n"
	if _, err := op.SetPolicy(ctx, "rjwrn", doc); err != nil {
		t.Fatal(err)
	}
	dev := newBrowser(t, ctl)
	page := dev.signIn("dev@rjwrn.example.com").body
	for _, want := range []string{"the policy lets you manage-users, set-policy in rjwrn", `<h2 id="users-title">Users</h2>`,
		`<td data-label="User">ops@rjwrn.example.com</td>`, "an operator removes them", `<textarea id="policy-rjwrn" name="document"`, "Your devices"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, no := range []string{"/console/accounts/rjwrn/users/ops@rjwrn.example.com/remove", "Latest changes", "/revoke", "operator of"} {
		if strings.Contains(page, no) {
			t.Errorf("a user granted manage-users and set-policy sees %q", no)
		}
	}
	f := inputs(t, page)
	form := url.Values{"csrf": f["csrf"], "document": {strings.Replace(doc, "version 1", "version 2", 1) + "operate user:dev@rjwrn.example.com -> *: read-audit\n"}}
	if a := dev.do("POST", "/console/accounts/rjwrn/policy", form, nil); a.status != 303 {
		t.Fatalf("dev saves the policy: %d %s", a.status, a.body)
	}
	page = dev.do("GET", "/console", nil, nil).body
	if !strings.Contains(page, "Latest changes") || !strings.Contains(page, "policy.set") {
		t.Errorf("granted read-audit, dev does not see the latest changes:\n%s", page)
	}
}
