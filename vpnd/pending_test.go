package vpnd

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/store"
)

func warning(st localapi.Status, code string) (localapi.Warning, bool) {
	for _, w := range st.Warnings {
		if w.Code == code {
			return w, true
		}
	}
	return localapi.Warning{}, false
}

// TestSignOutPendingUntilControlAnswers: `vpn down` while control is
// unreachable signs out here at once, keeps the ended session's token only
// to tell control (across a restart), says "sign-out pending at control",
// and ends the session on control once it answers again.
func TestSignOutPendingUntilControlAnswers(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	dir := t.TempDir()
	td := startDaemon(t, w, dir)
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	devID := td.Status().Session.DeviceID
	w.fc.SetDown(true)
	st, aerr := td.endSession(context.Background())
	if aerr != nil {
		t.Fatalf("down while control is down: %v", aerr)
	}
	if st.Session.State != localapi.SessionSignedOut || len(td.eng.config().Peers) != 0 {
		t.Fatalf("not signed out here at once: %+v", st.Session)
	}
	wn, ok := warning(st, localapi.WarnSignOutPending)
	if !ok || !strings.HasPrefix(wn.Message, "sign-out pending at control: control ") || !strings.Contains(wn.Message, "unreachable") {
		t.Fatalf("warnings %+v", st.Warnings)
	}
	p, _ := td.dir.LoadPrefs()
	if p.AccessToken != "" || len(p.Pending) != 1 || p.Pending[0].Token != "tok1" || p.Pending[0].Kind != store.PendingSignOut ||
		!slices.Equal(p.Pending[0].Clusters, []string{"ky3"}) {
		t.Fatalf("prefs while pending: %+v", p)
	}
	// Retried with backoff meanwhile; a restart keeps it pending.
	eventually(t, "a few retries", func() bool {
		_, ok := warning(td.Status(), localapi.WarnSignOutPending)
		return ok && td.Status().Session.State == localapi.SessionSignedOut
	})
	td.stop()
	td = startDaemon(t, w, dir)
	if _, ok := warning(td.Status(), localapi.WarnSignOutPending); !ok {
		t.Fatalf("the pending sign-out was lost by a restart: %+v", td.Status().Warnings)
	}
	if st := td.Status(); st.Session.State != localapi.SessionSignedOut {
		t.Fatalf("the kept token was used as a session: %+v", st.Session)
	}
	if w.fc.Calls("DELETE /v1/sessions/current") != 0 {
		t.Fatal("control heard it while down?")
	}
	w.fc.SetDown(false)
	eventually(t, "the sign-out reaching control", func() bool {
		_, pending := warning(td.Status(), localapi.WarnSignOutPending)
		return !pending
	})
	if w.fc.Calls("DELETE /v1/sessions/current") != 1 || len(w.fc.Joined(devID)) != 0 {
		t.Errorf("control: %d session ends, joined %v", w.fc.Calls("DELETE /v1/sessions/current"), w.fc.Joined(devID))
	}
	if err := td.settle(context.Background()); err != nil { // status says it at once; the file follows
		t.Fatal(err)
	}
	if p, _ := td.dir.LoadPrefs(); len(p.Pending) != 0 || p.AccessToken != "" {
		t.Errorf("prefs after: %+v", p)
	}
}

// TestLeavePending: a disconnect while control is unreachable is done here,
// shown on the cluster and retried; connecting again drops it.
func TestLeavePending(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	handOver(t, td, w, "tok1")
	ctx := context.Background()
	for _, cid := range []string{"ky3", "xym"} {
		if _, aerr := td.connect(ctx, cid); aerr != nil {
			t.Fatal(aerr)
		}
	}
	devID := td.Status().Session.DeviceID
	w.fc.SetDown(true)
	for _, cid := range []string{"ky3", "xym"} {
		if _, aerr := td.disconnect(ctx, cid); aerr != nil {
			t.Fatal(aerr)
		}
	}
	st := td.Status()
	c := cluster(st, "ky3")
	if c.State != localapi.ClusterDisconnected || !strings.HasPrefix(c.Error, "leaving ky3 pending at control: ") {
		t.Fatalf("ky3: %+v", c)
	}
	if _, ok := warning(st, localapi.WarnLeavePending); !ok || len(td.eng.config().Peers) != 0 {
		t.Fatalf("status %+v", st)
	}
	// xym is connected again before control answers: its leave is moot.
	w.fc.SetDown(false)
	if _, aerr := td.connect(ctx, "xym"); aerr != nil {
		t.Fatal(aerr)
	}
	eventually(t, "the leave reaching control", func() bool {
		_, pending := warning(td.Status(), localapi.WarnLeavePending)
		return !pending && cluster(td.Status(), "ky3").Error == ""
	})
	if got := w.fc.Joined(devID); !slices.Equal(got, []string{"xym"}) {
		t.Errorf("joined on control: %v, want xym only", got)
	}
	if c := cluster(td.Status(), "xym"); !c.Wanted {
		t.Errorf("xym: %+v", c)
	}
}
