package vpnd

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// TestUnwantedClusterLeftAtStart: the state a daemon killed between
// control's answer to a join and the prefs' write wanting the cluster
// leaves behind (the two overlap, actions.go connectAs): control holds
// the device in xym, the prefs on disk do not want it. The next start
// leaves xym on control, so its gateway stops serving the device a
// cluster it never connects, and keeps ky3.
func TestUnwantedClusterLeftAtStart(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	dir := t.TempDir()
	td := startDaemon(t, w, dir)
	st := handOver(t, td, w, "tok1")
	id := st.Session.DeviceID
	for _, cid := range []string{"ky3", "xym"} {
		if _, aerr := td.connect(context.Background(), cid); aerr != nil {
			t.Fatal(aerr)
		}
	}
	eventually(t, "both joined on control", func() bool { return slices.Equal(w.fc.Joined(id), []string{"ky3", "xym"}) })
	td.stop()
	p, err := td.dir.LoadPrefs()
	if err != nil {
		t.Fatal(err)
	}
	p.Wanted = []string{"ky3"} // the write wanting xym never happened
	if err := td.dir.SavePrefs(p); err != nil {
		t.Fatal(err)
	}
	leaves := w.fc.Calls("DELETE /v1/devices/{id}/clusters/{cid}")

	td = startDaemon(t, w, dir)
	eventually(t, "xym left on control", func() bool { return slices.Equal(w.fc.Joined(id), []string{"ky3"}) })
	eventually(t, "ky3 connected, xym not", func() bool {
		st, _ := td.answer(context.Background())
		return cluster(st, "ky3").Wanted && cluster(st, "ky3").PeerUp && !cluster(st, "xym").Wanted
	})
	// The leave's own map (xym gone) settles it: one leave, and ky3 stays.
	time.Sleep(200 * time.Millisecond)
	if n := w.fc.Calls("DELETE /v1/devices/{id}/clusters/{cid}") - leaves; n != 1 {
		t.Errorf("%d leaves sent, want 1 (xym's)", n)
	}
	if got := w.fc.Joined(id); !slices.Equal(got, []string{"ky3"}) {
		t.Errorf("joined on control %v, want [ky3]", got)
	}
}

// TestConnectNotUndoneByItsOwnMap: control's map listing a cluster whose
// join it has not answered yet (the join wakes the map stream first) is a
// connect in flight, not a cluster to leave.
func TestConnectNotUndoneByItsOwnMap(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	st := handOver(t, td, w, "tok1")
	id := st.Session.DeviceID
	var held atomic.Bool
	w.fc.BeforeJoinAnswer = func(cid string) {
		if cid != "xym" {
			return // not the connect under test
		}
		// Answer only once the daemon holds a map listing cid.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			td.mu.Lock()
			m := td.in.Map
			td.mu.Unlock()
			if m != nil && slices.ContainsFunc(m.Clusters, func(c api.ClusterConfig) bool { return c.CID == cid }) {
				held.Store(true)
				time.Sleep(50 * time.Millisecond) // the sync loop's turn with that map
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, aerr := td.connect(context.Background(), "xym"); aerr != nil {
		t.Fatal(aerr)
	}
	if !held.Load() {
		t.Fatal("the join was answered before the daemon had a map listing xym: the test did not test the race")
	}
	if n := w.fc.Calls("DELETE /v1/devices/{id}/clusters/{cid}"); n != 0 {
		t.Errorf("%d leaves sent during a connect", n)
	}
	if got := w.fc.Joined(id); !slices.Equal(got, []string{"xym"}) {
		t.Errorf("joined on control %v, want [xym]", got)
	}
}
