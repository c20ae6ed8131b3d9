package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/store"
)

// crashExit is the exit status of the helper process stopped dead inside
// the removal's transaction (internal/fault's, for the same reason: a test
// tells the planned stop from a real failure).
const crashExit = 86

// TestRemoveUserKilledMidway: control dies (os.Exit: no deferred function,
// no rollback, as a kill -9) inside the removal's transaction, after every
// write of it and before the commit. Started again on the same SQLite file,
// the user is whole: still in the account and its group, their session
// live (their daemon served, not told "removed"), their device on the
// gateway; the removal asked again then does all of it.
func TestRemoveUserKilledMidway(t *testing.T) {
	if db := os.Getenv("RUNOS_TEST_REMOVE_DIES_IN"); db != "" {
		removeAndDie(t, db)
		return
	}
	db := filepath.Join(t.TempDir(), "control.db")
	ctx := context.Background()
	var token, dev, sid string
	t.Run("before", func(t *testing.T) {
		e := newEnvAt(t, db, testWorld())
		bob := e.newDevice("bob@example.com", "bob-laptop")
		if _, err := bob.c.JoinCluster(ctx, bob.dev.ID, "ky3"); err != nil {
			t.Fatal(err)
		}
		e.serve("ky3", "n1", newKey(t))
		if _, err := e.op.CreateGroup(ctx, "rjwrn", "oncall"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.op.AddGroupMember(ctx, "rjwrn", "oncall", "bob@example.com"); err != nil {
			t.Fatal(err)
		}
		token, dev, sid = bob.c.Token, bob.dev.ID, bob.sessionID(t)
	})
	if t.Failed() {
		return
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestRemoveUserKilledMidway$", "-test.v")
	cmd.Env = append(os.Environ(), "RUNOS_TEST_REMOVE_DIES_IN="+db)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != crashExit || !strings.Contains(string(out), "stopping dead before the commit") {
		t.Fatalf("the helper did not stop inside the removal: %v\n%s", err, out)
	}

	e := newEnvAt(t, db, testWorld())
	us, err := e.op.Users(ctx, "rjwrn")
	i := slices.IndexFunc(us, func(u api.User) bool { return u.Email == "bob@example.com" })
	if err != nil || i < 0 || !slices.Equal(us[i].Groups, []string{"oncall"}) || !us[i].Password {
		t.Fatalf("users after the crash = %+v, %v; want bob whole (in oncall, with his password)", us, err)
	}
	bob := e.client(token)
	if dm, err := bob.DeviceMap(ctx, dev, 0, 0); err != nil || len(dm.Clusters) != 1 {
		t.Fatalf("bob's map after the crash = %+v, %v; want ky3 (his session live)", dm, err)
	}
	if m, err := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); err != nil || m.Serve == nil || len(m.Serve.Peers) != 1 {
		t.Fatalf("the gateway's map after the crash = %+v, %v; want bob's device", m, err)
	}

	// Asked again, the removal does all of it.
	got, err := e.op.RemoveUser(ctx, "rjwrn", "bob@example.com")
	if err != nil || !slices.Equal(got.Sessions, []string{sid}) || !slices.Equal(got.Devices, []string{dev}) || !slices.Equal(got.Groups, []string{"oncall"}) {
		t.Fatalf("the removal asked again = %+v, %v", got, err)
	}
	_, err = bob.DeviceMap(ctx, dev, 0, 0)
	if ae := wantCode(t, err, 401, api.CodeUnauthorized); !strings.Contains(ae.Message, "removed you") {
		t.Errorf("bob's daemon is told %q, want why", ae.Message)
	}
}

func removeAndDie(t *testing.T, db string) {
	e := newEnvAt(t, db, testWorld())
	err := e.srv.update(context.Background(), func(tx store.Writer) error {
		u, err := tx.User("bob@example.com")
		if err != nil {
			return err
		}
		if _, err := e.srv.removeUser(tx, "rjwrn", u, e.srv.now()); err != nil {
			return err
		}
		fmt.Println("removed bob inside the transaction: stopping dead before the commit")
		os.Exit(crashExit)
		return nil
	})
	t.Fatalf("the removal returned: %v", err)
}
