//go:build !windows

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// TestPolicyRefusesJoin: an operator sets a policy with the CLI that lets
// everyone connect to ky3 and only group oncall to xym; the lab's user,
// in no group, stays on ky3 and `runos vpn connect xym` says why not;
// `runos policy test` answers with its exit status; once the user is added
// to oncall, xym connects. The refusal is in the audit log.
func TestPolicyRefusesJoin(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop, user := w.env.Client.Host, w.env.User
	op := []string{"RUNOS_TOKEN=" + w.env.OperatorToken}

	w.must(laptop, op, "runos", "groups", "create", "oncall")
	file := filepath.Join(w.env.Dir, "policy.txt")
	doc := "version 1\nallow * -> ky3: *\nallow group:oncall -> xym: *\n"
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	w.must(laptop, op, "runos", "policy", "set", file)

	exit := func(argv ...string) int {
		t.Helper()
		out, err := w.run(laptop, op, argv...)
		t.Logf("%s$ %s\n%s", laptop, strings.Join(argv, " "), out)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if code := exit("runos", "policy", "test", "--user", user, "--to", "ky3"); code != 0 {
		t.Errorf("policy test --to ky3: exit %d, want 0 (allow)", code)
	}
	if code := exit("runos", "policy", "test", "--user", user, "--to", "xym"); code != 1 {
		t.Errorf("policy test --to xym: exit %d, want 1 (deny)", code)
	}

	start := w.lastAuditID()
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("", "ky3"))
	out, err := w.run(laptop, nil, "runos", "vpn", "connect", "xym")
	t.Logf("%s$ runos vpn connect xym (refused)\n%s", laptop, out)
	if err == nil || !strings.Contains(out, "connect xym: the access policy of account") ||
		!strings.Contains(out, "does not let "+user+" (in no group) connect to xym") ||
		!strings.Contains(out, "add you to a group that may connect to xym") {
		t.Fatalf("connect xym under a policy that refuses it: %v\n%s", err, out)
	}
	var refused []api.AuditEntry
	for _, e := range w.auditSince(start) {
		if e.Kind == api.AuditJoinRefused {
			refused = append(refused, e)
		}
	}
	if len(refused) != 1 || refused[0].CID != "xym" || refused[0].Actor != user {
		t.Errorf("join.refused entries: %+v", refused)
	}

	// In the group, the same command connects.
	w.must(laptop, op, "runos", "groups", "add", "oncall", user)
	if code := exit("runos", "policy", "test", "--user", user, "--to", "xym"); code != 0 {
		t.Errorf("policy test --to xym as a member of oncall: exit %d, want 0", code)
	}
	w.must(laptop, nil, "runos", "vpn", "connect", "xym")
	w.waitStatus(laptop, 30*time.Second, "connected to ky3 and xym", upOn("", "ky3", "xym"))
}
