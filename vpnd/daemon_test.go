package vpnd

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/store"
	"github.com/runos/vpn/vpnd/wgcfg"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func handOver(t *testing.T, td *testDaemon, w *world, token string) localapi.Status {
	t.Helper()
	st, aerr := td.setSession(context.Background(), localapi.SessionRequest{APIURL: w.url, AccessToken: token}, nil)
	if aerr != nil {
		t.Fatalf("setSession: %v", aerr)
	}
	return st
}

func peerKeys(c wgcfg.Config) []string {
	var out []string
	for _, p := range c.Peers {
		out = append(out, p.PublicKey.String())
	}
	return out
}

// TestSessionConnectMoveExpire walks the daemon's main life with a fake
// tunnel: hand-over, connect, a move pushed by control, expiry and the next
// sign-in restoring what the user wanted.
func TestSessionConnectMoveExpire(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())

	if _, aerr := td.connect(context.Background(), "ky3"); aerr == nil || aerr.e.Code != localapi.CodeSignedOut ||
		aerr.e.Message != "not signed in: run `runos vpn up`" {
		t.Fatalf("connect while signed out: %v", aerr)
	}
	st := handOver(t, td, w, "tok1")
	if st.Session.State != localapi.SessionSignedIn || st.Session.User != "alice@example.com" || st.Session.DeviceID == "" {
		t.Fatalf("after hand-over: %+v", st.Session)
	}
	dev, ok := w.fc.Device(td.public.String())
	if !ok || dev.ID != st.Session.DeviceID {
		t.Fatalf("device not registered with its public key: %+v", w.fc.Devices())
	}

	// A bad cid is refused before any request.
	joins := w.fc.Calls("PUT /v1/devices/{id}/clusters/{cid}")
	if _, aerr := td.connect(context.Background(), "KY3"); aerr == nil || aerr.e.Code != localapi.CodeInvalid {
		t.Fatalf("connect KY3: %v", aerr)
	}
	if w.fc.Calls("PUT /v1/devices/{id}/clusters/{cid}") != joins {
		t.Error("an invalid cid reached control")
	}
	// An unknown cid: control's error, nothing changed.
	if _, aerr := td.connect(context.Background(), "zzz9"); aerr == nil || aerr.e.Code != api.CodeNotFound ||
		!strings.Contains(aerr.e.Message, "cluster zzz9 not found") {
		t.Fatalf("connect zzz9: %v", aerr)
	}
	if p, _ := td.dir.LoadPrefs(); len(p.Wanted) != 0 {
		t.Errorf("wanted after a refused connect: %v", p.Wanted)
	}

	st, aerr := td.connect(context.Background(), "ky3")
	if aerr != nil {
		t.Fatal(aerr)
	}
	// The answer comes once control accepted (and the wanted cluster is
	// on disk); the map stream brings the cluster right after.
	if c := cluster(st, "ky3"); !c.Wanted || c.State == localapi.ClusterDisconnected {
		t.Errorf("ky3 right after connect: %+v", c)
	}
	eventually(t, "ky3 peerUp", func() bool { return cluster(td.Status(), "ky3").PeerUp })
	if c := cluster(td.Status(), "ky3"); c.State != localapi.ClusterConnected || c.Server.NodeID != "n1" {
		t.Errorf("ky3 up: %+v", c)
	}
	cfg := td.eng.config()
	if !slices.Equal(peerKeys(cfg), []string{w.serverKey("ky3", "n1").String()}) || len(cfg.Routes) != 1 ||
		cfg.Routes[0].String() != "100.100.1.0/24" || cfg.Addresses[0].String() != dev.Address+"/32" {
		t.Errorf("tunnel config %+v", cfg)
	}
	if p, _ := td.dir.LoadPrefs(); !slices.Equal(p.Wanted, []string{"ky3"}) || p.AccessToken != "tok1" {
		t.Errorf("prefs %+v", p)
	}
	if c := cluster(td.Status(), "xym"); c.State != localapi.ClusterDisconnected || c.Wanted || c.Name != "tc2-xym" {
		t.Errorf("xym (the account's other cluster): %+v", c)
	}

	// A move: control pushes the new node, key and endpoint; the peer is
	// swapped with no local action.
	w.fc.SetVPN("ky3", w.vpn("ky3", "n2", "10.2.0.2:32768", "100.100.1"))
	eventually(t, "ky3 on n2 with peerUp", func() bool {
		c := cluster(td.Status(), "ky3")
		return c.Server.NodeID == "n2" && c.PeerUp
	})
	if got := peerKeys(td.eng.config()); !slices.Equal(got, []string{w.serverKey("ky3", "n2").String()}) {
		t.Errorf("after the move the tunnel has peers %v", got)
	}

	// Control ends the session: everything comes down, the wanted clusters stay.
	w.fc.ExpireSession("tok1")
	eventually(t, "session expired", func() bool { return td.Status().Session.State == localapi.SessionExpired })
	if err := td.settle(context.Background()); err != nil { // status says it at once; the tunnel follows
		t.Fatal(err)
	}
	st = td.Status()
	if c := cluster(st, "ky3"); c.State != localapi.ClusterDisconnected || !c.Wanted || c.PeerUp {
		t.Errorf("ky3 after expiry: %+v", c)
	}
	if cfg := td.eng.config(); len(cfg.Peers) != 0 || len(cfg.Routes) != 0 {
		t.Errorf("tunnel after expiry: %+v", cfg)
	}
	if _, aerr := td.connect(context.Background(), "xym"); aerr == nil || aerr.e.Code != localapi.CodeSignedOut ||
		!strings.Contains(aerr.e.Message, "expired") {
		t.Errorf("connect after expiry: %v", aerr)
	}

	// The next sign-in restores ky3 without asking.
	w.fc.AddSession("tok2", "alice@example.com", time.Hour)
	handOver(t, td, w, "tok2")
	eventually(t, "ky3 restored", func() bool {
		c := cluster(td.Status(), "ky3")
		return c.State == localapi.ClusterConnected && c.PeerUp && c.Server.NodeID == "n2"
	})
}

func TestRestartResumesWithoutNewSession(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	dir := t.TempDir()
	td := startDaemon(t, w, dir)
	handOver(t, td, w, "tok1")
	for _, cid := range []string{"ky3", "xym"} {
		if _, aerr := td.connect(context.Background(), cid); aerr != nil {
			t.Fatal(aerr)
		}
	}
	td.stop()
	sessions := w.fc.Calls("GET /v1/me")

	td2 := startDaemon(t, w, dir)
	eventually(t, "both clusters back", func() bool {
		st := td2.Status()
		return cluster(st, "ky3").PeerUp && cluster(st, "xym").PeerUp
	})
	if w.fc.Calls("GET /v1/me") != sessions {
		t.Error("the restart needed a new session hand-over")
	}
	if len(td2.eng.config().Peers) != 2 {
		t.Errorf("peers after restart: %v", peerKeys(td2.eng.config()))
	}
}

func TestDownEndsEverything(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	dir := t.TempDir()
	td := startDaemon(t, w, dir)
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	devID := td.Status().Session.DeviceID
	keyBefore, _ := os.ReadFile(filepath.Join(dir, store.KeyFile))
	st, aerr := td.endSession(context.Background())
	if aerr != nil {
		t.Fatal(aerr)
	}
	if st.Session.State != localapi.SessionSignedOut || cluster(st, "ky3").Wanted {
		t.Errorf("after down: %+v", st)
	}
	if w.fc.Calls("DELETE /v1/sessions/current") != 1 || w.fc.Calls("DELETE /v1/devices/{id}/clusters/{cid}") != 1 {
		t.Error("down did not leave the cluster and end the session on control")
	}
	if len(w.fc.Joined(devID)) != 0 {
		t.Errorf("still joined on control: %v", w.fc.Joined(devID))
	}
	if cfg := td.eng.config(); len(cfg.Peers)+len(cfg.Routes)+len(cfg.Addresses) != 0 {
		t.Errorf("tunnel after down: %+v", cfg)
	}
	p, _ := td.dir.LoadPrefs()
	if p.AccessToken != "" || len(p.Wanted) != 0 {
		t.Errorf("prefs after down: %+v", p)
	}
	keyAfter, _ := os.ReadFile(filepath.Join(dir, store.KeyFile))
	if len(keyBefore) == 0 || string(keyBefore) != string(keyAfter) {
		t.Error("down changed or removed the device key")
	}
	// Down again, signed out: fine, nothing to do.
	if _, aerr := td.endSession(context.Background()); aerr != nil {
		t.Error(aerr)
	}
}

func TestControlUnreachableKeepsTunnels(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	eventually(t, "peerUp", func() bool { return cluster(td.Status(), "ky3").PeerUp })
	w.fc.SetDown(true)
	eventually(t, "control error in status", func() bool {
		return strings.Contains(td.Status().Session.Error, "unreachable")
	})
	st := td.Status()
	if c := cluster(st, "ky3"); c.State != localapi.ClusterConnected || !c.PeerUp {
		t.Errorf("ky3 while control is down: %+v", c)
	}
	if st.Session.State != localapi.SessionSignedIn {
		t.Errorf("session while control is down: %+v", st.Session)
	}
	if _, aerr := td.connect(context.Background(), "xym"); aerr == nil || aerr.e.Code != localapi.CodeControl ||
		!strings.Contains(aerr.e.Message, "unreachable") {
		t.Errorf("connect while control is down: %v", aerr)
	}
	w.fc.SetDown(false)
	eventually(t, "control error cleared", func() bool { return td.Status().Session.Error == "" })
}

func TestLocalClockExpiry(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	// The local clock passes expiresAt while control says nothing.
	td.mu.Lock()
	exp := td.in.Prefs.ExpiresAt
	td.clock = func() time.Time { return exp.Add(time.Second) }
	td.mu.Unlock()
	td.kickRead()
	eventually(t, "expired by the clock", func() bool { return td.Status().Session.State == localapi.SessionExpired })
	if err := td.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(td.eng.config().Peers) != 0 {
		t.Error("peers left after the session lapsed")
	}
	td.mu.Lock()
	running := td.sess != nil
	td.mu.Unlock()
	if running {
		t.Error("the sync still runs with a lapsed session")
	}
}

func TestApplyFailureIsReportedAndRetried(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	td.eng.mu.Lock()
	td.eng.applyErr = errFake("netlink: operation not permitted")
	td.eng.mu.Unlock()
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	eventually(t, "tunnel error", func() bool { return strings.Contains(td.Status().Tunnel.Error, "not permitted") })
	td.eng.mu.Lock()
	td.eng.applyErr = nil
	td.eng.mu.Unlock()
	eventually(t, "retried and up", func() bool {
		st := td.Status()
		return st.Tunnel.Error == "" && cluster(st, "ky3").PeerUp
	})
}

type errFake string

func (e errFake) Error() string { return string(e) }

func TestPublishOnlyOnChange(t *testing.T) {
	td := &daemon{eng: newFakeEngine(), clock: time.Now}
	td.in = state.Inputs{Version: "v"}
	td.updateLocked()
	seq := td.status.Seq
	for range 10 {
		td.updateLocked()
	}
	if td.status.Seq != seq {
		t.Errorf("seq moved from %d to %d with nothing changing", seq, td.status.Seq)
	}
	td.in.ControlErr = "x"
	td.in.Prefs.AccessToken = "t"
	td.updateLocked()
	if td.status.Seq != seq+1 {
		t.Errorf("seq %d after a change, want %d", td.status.Seq, seq+1)
	}
}

func TestSlowWatcherGetsLatest(t *testing.T) {
	td := &daemon{eng: newFakeEngine(), clock: time.Now}
	td.in = state.Inputs{Version: "v"}
	td.updateLocked()
	w, stop := td.watch()
	defer stop()
	if st := w.take(); st == nil || st.Seq != td.status.Seq {
		t.Fatalf("first take: %+v", st)
	}
	// Many changes while the reader sleeps: publishing never blocks.
	for i := range 1000 {
		td.in.ControlErr = "err " + string(rune('a'+i%26)) + time.Duration(i).String()
		td.in.Prefs.AccessToken = "t"
		td.updateLocked()
	}
	st := w.take()
	if st == nil || st.Seq != td.status.Seq {
		t.Fatalf("slow reader got %+v, want the latest seq %d", st, td.status.Seq)
	}
	if w.take() != nil {
		t.Error("a second take returned a stale status")
	}
}

func TestPeerRemovedByHandIsRestored(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	eventually(t, "peerUp", func() bool { return cluster(td.Status(), "ky3").PeerUp })
	applies := func() int { td.eng.mu.Lock(); defer td.eng.mu.Unlock(); return td.eng.applies }
	before := applies()
	td.eng.mu.Lock()
	td.eng.peers = map[wgtypes.Key]wgcfg.PeerReport{} // as `wg set wg1 peer … remove` would
	td.eng.mu.Unlock()
	td.kickRead()
	eventually(t, "the peer put back", func() bool { return applies() > before && cluster(td.Status(), "ky3").PeerUp })
}
