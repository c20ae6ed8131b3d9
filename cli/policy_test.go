package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
)

// TestGroupsAndPolicyVerbs drives groups and policy against a real control:
// a policy set from a file and from standard input, its bad lines named,
// a replay refused, and test's exit status saying allow (0) or deny (1).
func TestGroupsAndPolicyVerbs(t *testing.T) {
	h, _ := realControlHarness(t)
	h.run("groups", "list").want(t, 0, []string{"No groups. Create one: runos groups create NAME"}, nil)
	h.run("groups", "create", "oncall").want(t, 0, []string{"Created group oncall."}, nil)
	h.run("groups", "create", "oncall").want(t, 1, nil, []string{"create group oncall: group oncall already exists in rjwrn"})
	h.run("groups", "add", "oncall", "ops@rjwrn.example.com").want(t, 0, []string{"Added ops@rjwrn.example.com to group oncall (1 member(s))."}, nil)
	h.run("groups", "add", "nope", "ops@rjwrn.example.com").want(t, 1, nil, []string{"no group nope in rjwrn (create it: runos groups create nope)"})
	h.run("groups", "list").want(t, 0, []string{"GROUP", "oncall  ops@rjwrn.example.com"}, nil)
	var gs []api.Group
	if err := json.Unmarshal([]byte(h.run("groups", "list", "--json").stdout), &gs); err != nil || len(gs) != 1 || gs[0].Members[0] != "ops@rjwrn.example.com" {
		t.Fatalf("groups --json: %v %+v", err, gs)
	}

	h.run("policy", "get").want(t, 0, nil, []string{"Account rjwrn has no policy: every user may connect to every cluster."})
	h.run("policy", "test", "--user", "dev@rjwrn.example.com", "--to", "xym").want(t, 0, []string{"allow: the account has no policy"}, nil)

	file := filepath.Join(t.TempDir(), "policy.txt")
	bad := "version 1\nallow group:oncal -> xym: *\nallow * -> ky9: *\n"
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	h.run("policy", "set", file).want(t, 1, nil, []string{
		file + `: policy line 2: unknown group "oncal"`, file + `: policy line 3: unknown cluster "ky9"`, "set the policy: invalid policy: policy line 2"})
	doc := "# prod for on-call only\nversion 1\nallow group:oncall -> *: *\nallow * -> ky3: 10.96.0.20:5432\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	h.run("policy", "set", file).want(t, 0, []string{"Policy version 1 of rjwrn is in force."}, nil)
	h.run("policy", "set", file).want(t, 1, nil, []string{"policy version 1 is not newer than version 1 in force"})
	h.run("policy", "get").want(t, 0, []string{doc}, nil)

	h.stdin = strings.Replace(doc, "version 1", "version 2", 1)
	h.run("policy", "set", "-", "--json").want(t, 0, []string{`"version": 2`}, nil)
	h.stdin = ""

	h.run("policy", "test", "--user", "dev@rjwrn.example.com", "--to", "xym").want(t, 1, []string{"deny: no rule lets dev@rjwrn.example.com (in no group) connect to xym"}, nil)
	h.run("policy", "test", "--user", "dev@rjwrn.example.com", "--to", "ky3:10.96.0.20:5432").want(t, 0,
		[]string{"allow: allowed by line 4: allow * -> ky3: 10.96.0.20:5432"}, nil)
	h.run("policy", "test", "--user", "ops@rjwrn.example.com", "--to", "xym").want(t, 0, []string{"allow: allowed by line 3"}, nil)
	r := h.run("policy", "test", "--user", "dev@rjwrn.example.com", "--to", "ky3:10.96.0.20:22", "--json")
	var d api.PolicyDecision
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.Allow || r.code != 1 || r.stderr != "" {
		t.Fatalf("test --json of a deny: %v %+v\n%s", err, d, r)
	}
	h.run("policy", "test", "--user", "dev@rjwrn.example.com").want(t, 2, nil, []string{`required flag(s) "to" not set`})
	h.run("policy", "test", "--user", "dev@rjwrn.example.com", "--to", "ky3:nope").want(t, 1, nil, []string{"test the policy: to:"})

	h.run("groups", "remove", "oncall", "ops@rjwrn.example.com").want(t, 0, []string{"Removed ops@rjwrn.example.com from group oncall (0 member(s))."}, nil)
	h.run("policy", "test", "--user", "ops@rjwrn.example.com", "--to", "xym").want(t, 1, []string{"deny:"}, nil)
	h.run("audit", "--kind", "policy").want(t, 0, []string{"policy.set"}, nil)
	h.run("audit", "--kind", "group").want(t, 0, []string{"group.changed", "ops@rjwrn.example.com removed from oncall"}, nil)
}
