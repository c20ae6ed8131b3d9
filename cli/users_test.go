package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/controltest"
)

// TestUsersVerbs drives users list and remove against a real control: a
// removed user's device leaves the account, their session is refused from
// then on, and the refusals (no such user, another account's user, a user
// of another account) say so with exit status 1.
func TestUsersVerbs(t *testing.T) {
	h, ctl := realControlHarness(t)
	d := laptop(t, ctl, "dev@rjwrn.example.com", "dev-laptop", "ky3")
	h.run("groups", "create", "oncall").want(t, 0, nil, nil)
	h.run("groups", "add", "oncall", "dev@rjwrn.example.com").want(t, 0, nil, nil)
	h.run("users", "list").want(t, 0, []string{"USER", "dev@rjwrn.example.com  user", "password", "oncall",
		"ops@rjwrn.example.com  operator"}, nil)
	var us []api.User
	if err := json.Unmarshal([]byte(h.run("users", "list", "--json").stdout), &us); err != nil || len(us) != 2 || us[0].Email != "dev@rjwrn.example.com" {
		t.Fatalf("users --json: %v %+v", err, us)
	}

	h.run("users", "remove", "nobody@rjwrn.example.com").want(t, 1, nil, []string{"remove user nobody@rjwrn.example.com: no user nobody@rjwrn.example.com in rjwrn (list them: runos users list)"})
	h.run("users", "remove", "eve@other.example.com").want(t, 1, nil, []string{"no user eve@other.example.com in rjwrn"})
	h.run("users", "remove").want(t, 2, nil, []string{"EMAIL"})
	h.run("users", "remove", "--help").want(t, 0, []string{"ends at once", "created again at", "--json"}, nil)

	h.run("users", "remove", "dev@rjwrn.example.com").want(t, 0, []string{"Removed dev@rjwrn.example.com from rjwrn.",
		"Sessions ended: 1. Devices removed: 1.", "Groups left: oncall."}, nil)
	h.run("devices", "list").want(t, 0, nil, nil)
	if r := h.run("devices", "show", d.ID); r.code == 0 {
		t.Errorf("the removed user's device is still shown:\n%s", r)
	}
	r := h.run("users", "remove", "dev@rjwrn.example.com", "--json")
	r.want(t, 1, nil, []string{"no user dev@rjwrn.example.com in rjwrn"})
	if _, err := ctl.API(ctl.SignIn(t, "ops@rjwrn.example.com")).Users(context.Background(), "rjwrn"); err != nil {
		t.Fatal(err)
	}

	// A user of another account: eve's own session is told of no rjwrn.
	h.env["RUNOS_TOKEN"] = ctl.SignIn(t, "eve@other.example.com")
	h.run("users", "remove", "ops@rjwrn.example.com", "--aid", "rjwrn").want(t, 1, nil, []string{"remove user ops@rjwrn.example.com", "no account rjwrn among your accounts"})
	h.env["RUNOS_TOKEN"] = controltest.OperatorToken
	h.run("users", "list", "--json").want(t, 0, []string{`"ops@rjwrn.example.com"`}, nil)
}

// TestUsersRemoveJSON: --json prints what was done.
func TestUsersRemoveJSON(t *testing.T) {
	h, ctl := realControlHarness(t)
	d := laptop(t, ctl, "dev@rjwrn.example.com", "dev-laptop", "ky3")
	r := h.run("users", "remove", "DEV@rjwrn.example.com", "--json")
	var out api.RemovedUser
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || out.Email != "dev@rjwrn.example.com" ||
		len(out.Sessions) != 1 || len(out.Devices) != 1 || out.Devices[0] != d.ID {
		t.Fatalf("remove --json: %v %+v\n%s", err, out, r)
	}
}
