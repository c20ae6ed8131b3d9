//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestRemoveUserEndsTheirAccess: an operator removes a user with `runos
// users remove` while the user's laptop is connected: the serving gateway
// drops the laptop's key within a second, the laptop's session ends with
// the reason, its DNS is restored, and the audit log has the removal.
func TestRemoveUserEndsTheirAccess(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	u := w.idpUser(lab.GroupOncall)
	resolv := filepath.Join(w.env.Dir, "hosts", laptop, "resolv.conf")
	original, err := os.ReadFile(resolv)
	if err != nil {
		t.Fatal(err)
	}
	w.must(laptop, []string{lab.BrowserUserEnv + "=" + u.Email}, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 30*time.Second, "ky3 up", upOn("", "ky3"))
	key := st.Tunnel.PublicKey
	if st.Session.User != u.Email || !strings.Contains(w.gatewayPeers("ky3-n1"), key) {
		t.Fatalf("signed in as %q; ky3-n1 lists the laptop: %v", st.Session.User, strings.Contains(w.gatewayPeers("ky3-n1"), key))
	}
	op := []string{"RUNOS_TOKEN=" + w.env.OperatorToken}
	if out := w.must(laptop, op, "runos", "users", "list"); !strings.Contains(out, u.Email) {
		t.Fatalf("users list:\n%s", out)
	}
	start := w.lastAuditID()

	before := time.Now()
	w.must(laptop, op, "runos", "users", "remove", u.Email)
	for strings.Contains(w.gatewayPeers("ky3-n1"), key) {
		if time.Since(before) > 10*time.Second {
			t.Fatal("ky3-n1 still lists the removed user's key after 10 s")
		}
	}
	took := time.Since(before)
	t.Logf("runos users remove → ky3-n1 without the key (stock wg, polled): %s", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("the gateway dropped the key %s after the command, want within a second of it (2 s with the CLI's start)", took)
	}

	// The laptop: the session ended, saying why; DNS restored.
	st = w.waitStatus(laptop, 10*time.Second, "the session ended", func(s *localapi.Status) bool {
		return s.Session.State != localapi.SessionSignedIn
	})
	human := w.stdout(laptop, nil, "runos", "vpn", "status")
	t.Logf("$ runos vpn status\n%s", human)
	if !strings.Contains(human, "removed you from your RunOS account") {
		t.Errorf("vpn status after the removal (session %+v):\n%s", st.Session, human)
	}
	w.waitFor(5*time.Second, "resolv.conf restored", func() bool {
		b, _ := os.ReadFile(resolv)
		return string(b) == string(original)
	})
	if out := w.must(laptop, op, "runos", "users", "list"); strings.Contains(out, u.Email) {
		t.Errorf("users list still names %s:\n%s", u.Email, out)
	}
	if got := kinds(w.auditSince(start)); !slices.Contains(got, "user.removed") {
		t.Errorf("audit entries since the removal: %q", got)
	}
}
