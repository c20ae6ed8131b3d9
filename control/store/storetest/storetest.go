// Package storetest is the one conformance suite of control's stores: every
// store.Store (sqlstore on a SQLite file and on a real PostgreSQL server)
// runs it from its own tests, so both keep the same semantics: versions and
// topics committed with the change, rollbacks that leave nothing, ErrExists
// and ErrPoolFull, records that read back as written, peers of live
// sessions only, changes serialized across replicas, shared secrets and
// leases, and the OAuth grant contract (control/oauth/storetest).
//
// It holds behaviour, not SQL: a store's own tests keep only what is
// particular to it (its migrations' bookkeeping, its connection faults).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/oauth"
	oauthtest "github.com/runos/vpn/control/oauth/storetest"
	"github.com/runos/vpn/control/store"
)

// T0 is the time the suite's records are dated around. Stores under test
// should be opened with a clock reading T0 - 4h, so that the OAuth
// contract's entries (dated T0 - 3h) are not purged as expired.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Database opens handles on one fresh database: each call of open is
// another handle (another replica, for a store that several share).
type Database func(t *testing.T) (open func(t *testing.T) store.Store)

// Run runs the suite. shared says whether several handles on one database
// (several replicas) are supported, and so tested; a SQLite file has one
// runos-control.
func Run(t *testing.T, db Database, shared bool) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, func(*testing.T) store.Store)
	}{
		{"versions, rollback and ErrExists", testVersions},
		{"records round trip", testRecords},
		{"operator is a role per account", testRoles},
		{"free index fills gaps when full", testFreeIndex},
		{"peers are live sessions only", testPeers},
		{"installing services", testInstalling},
		{"secret kept", testSecret},
		{"ping", testPing},
		{"concurrent allocations distinct", testConcurrentAllocations},
		{"DevicesAndIdle", testDevicesAndIdle},
		{"APITokens", testAPITokens},
		{"AuditLog", testAuditLog},
		{"Policy", testPolicy},
		{"Groups", testGroups},
		{"StatsCountSessionsAndDevicesByState", testStatsCountSessionsAndDevicesByState},
		{"ClusterInside", testClusterInside},
		{"IdentityGrants", testIdentityGrants},
		{"RemoveUser", testRemoveUser},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, db(t)) })
	}
	t.Run("oauth grants", func(t *testing.T) {
		oauthtest.Run(t, func(t *testing.T) oauth.GrantStore { return db(t)(t).Grants() })
	})
	if !shared {
		return
	}
	for _, c := range []struct {
		name string
		fn   func(*testing.T, func(*testing.T) store.Store)
	}{
		{"replicas: one secret", testSharedSecret},
		{"replicas: lease held by one at a time", testLease},
		{"replicas: allocations distinct", testReplicaAllocations},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, db(t)) })
	}
}

var ctx = context.Background()

func update(t *testing.T, s store.Store, fn func(store.Writer) error) store.Change {
	t.Helper()
	ch, err := s.Update(ctx, fn)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func view(t *testing.T, s store.Store, fn func(store.Reader) error) {
	t.Helper()
	if err := s.View(ctx, fn); err != nil {
		t.Fatal(err)
	}
}

// seedBasics is an account, a user, cluster ky3 with nodes n1 and n2.
func seedBasics(t *testing.T, s store.Store) {
	t.Helper()
	update(t, s, func(w store.Writer) error {
		if err := w.PutAccount(model.Account{AID: "rjwrn", Name: "R", OperatorTokenHash: "op"}); err != nil {
			return err
		}
		if err := w.PutUser(model.User{Email: "a@x", PasswordHash: "$2a$", Accounts: []string{"rjwrn"}}); err != nil {
			return err
		}
		if err := w.PutCluster(model.Cluster{CID: "ky3", AID: "rjwrn", Name: "tc3-ky3", DomainRoot: "example.com"}); err != nil {
			return err
		}
		for _, nid := range []string{"n1", "n2"} {
			if err := w.PutNode(model.Node{CID: "ky3", NID: nid, Roles: []string{"worker"}, EnrollmentTokenHash: "enr-" + nid,
				DeclaredIngress: netip.MustParseAddr("10.77.0.21")}); err != nil {
				return err
			}
		}
		w.Touch("cluster:ky3")
		return nil
	})
}

func testVersions(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	ch := update(t, s, func(w store.Writer) error {
		w.Touch("device:d1", "cluster:ky3", "device:d1")
		return nil
	})
	if ch.Version != 2 || len(ch.Topics) != 2 || ch.Topics[0] != "device:d1" || ch.Topics[1] != "cluster:ky3" {
		t.Fatalf("change = %+v; want version 2 with device:d1, cluster:ky3", ch)
	}
	// No topic touched: no version.
	if ch := update(t, s, func(w store.Writer) error { return nil }); ch.Version != 0 {
		t.Fatalf("empty change = %+v", ch)
	}
	// The store says what a change commits as, even with no topic.
	var said uint64
	ch = update(t, s, func(w store.Writer) error {
		var err error
		said, err = w.CommitVersion()
		return err
	})
	if said != 3 || ch.Version != 3 {
		t.Fatalf("CommitVersion said %d, the change committed as %d; want 3", said, ch.Version)
	}
	// A failing change leaves nothing behind, not even its version bump.
	boom := errors.New("refused")
	_, err := s.Update(ctx, func(w store.Writer) error {
		if err := w.PutAccount(model.Account{AID: "other"}); err != nil {
			return err
		}
		w.Touch("cluster:xym")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	view(t, s, func(r store.Reader) error {
		if _, err := r.Account("other"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("account of a rolled-back change: %v", err)
		}
		g, _ := r.GlobalVersion()
		v, _ := r.TopicVersion("cluster:ky3", "device:d1")
		x, _ := r.TopicVersion("cluster:xym")
		none, _ := r.TopicVersion()
		all, _ := r.AllTopicVersions()
		if g != 3 || v != 2 || x != 0 || none != 0 || len(all) != 2 {
			t.Errorf("global %d, ky3/d1 %d, xym %d, none %d, all %v", g, v, x, none, all)
		}
		since, err := r.TopicsSince(1)
		if err != nil || len(since) != 2 || since["cluster:ky3"] != 2 || since["device:d1"] != 2 {
			t.Errorf("topics since 1 = %v, %v", since, err)
		}
		if since, _ := r.TopicsSince(2); len(since) != 0 {
			t.Errorf("topics since 2 = %v", since)
		}
		return nil
	})
	// Duplicate keys are ErrExists.
	if _, err := s.Update(ctx, func(w store.Writer) error { return w.PutAccount(model.Account{AID: "rjwrn"}) }); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate account: %v", err)
	}
	if _, err := s.Update(ctx, func(w store.Writer) error {
		return w.PutNode(model.Node{CID: "ky3", NID: "n3", EnrollmentTokenHash: "enr-n1"})
	}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate enrollment token: %v", err)
	}
	// A change goes on after ErrExists, and commits what it did after it
	// (importing a world file that exists in part).
	update(t, s, func(w store.Writer) error {
		if err := w.PutAccount(model.Account{AID: "rjwrn"}); !errors.Is(err, store.ErrExists) {
			t.Errorf("duplicate account inside a change: %v", err)
		}
		return w.PutAccount(model.Account{AID: "after", Name: "A"})
	})
	view(t, s, func(r store.Reader) error {
		if a, err := r.Account("after"); err != nil || a.Name != "A" {
			t.Errorf("account put after an ErrExists: %+v, %v", a, err)
		}
		return nil
	})
	// Missing records are ErrNotFound, also for updates.
	if _, err := s.Update(ctx, func(w store.Writer) error { return w.UpdateNode(model.Node{CID: "ky3", NID: "n9"}) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of a missing node: %v", err)
	}
}

func testRecords(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	sub := netip.MustParsePrefix("100.100.1.0/24")
	update(t, s, func(w store.Writer) error {
		n, err := w.Node("ky3", "n1")
		if err != nil {
			return err
		}
		n.LastHeartbeat = T0
		n.Published = true
		n.Roles = []string{"control-plane", "worker"}
		n.DetectedIP = netip.MustParseAddr("198.51.100.21")
		n.GatewayKey, n.GatewayVersion = "gk", "v1"
		if err := w.UpdateNode(n); err != nil {
			return err
		}
		c, err := w.Cluster("ky3")
		if err != nil {
			return err
		}
		c.IsConfigured, c.UserVPN, c.CustomDomains = true, "wireguard", []string{"apps.example.org"}
		if err := w.UpdateCluster(c); err != nil {
			return err
		}
		if err := w.PutService(model.Service{ID: "wg1", CID: "ky3", Name: "vpn", NodeID: "n1", Port: 32768, State: "installing", SubnetIndex: 1, Subnet: sub, CreatedAt: T0,
			RelayURL: "https://{ingress}:8443/relay"}); err != nil {
			return err
		}
		return w.PutMove(model.Move{ID: "m1", CID: "ky3", ServiceID: "wg1", FromNodeID: "n1", TargetNodeID: "n2", State: "preparing",
			Warnings: []string{"w"}, StartedAt: T0, PrepareVersion: 9})
	})
	view(t, s, func(r store.Reader) error {
		n, err := r.NodeByEnrollmentToken("enr-n1")
		if err != nil || !n.LastHeartbeat.Equal(T0) || !n.Published || !n.IsControlPlane() || n.DeclaredIngress.String() != "10.77.0.21" ||
			n.DetectedIP.String() != "198.51.100.21" || n.PublicIP.IsValid() || n.GatewayKey != "gk" || n.GatewayVersion != "v1" {
			t.Errorf("node = %+v, %v", n, err)
		}
		if ns, err := r.Nodes("ky3"); err != nil || len(ns) != 2 || ns[0].NID != "n1" || ns[1].NID != "n2" {
			t.Errorf("nodes = %+v, %v", ns, err)
		}
		c, err := r.Cluster("ky3")
		if err != nil || !c.IsConfigured || c.UserVPN != "wireguard" || len(c.CustomDomains) != 1 || c.AID != "rjwrn" {
			t.Errorf("cluster = %+v, %v", c, err)
		}
		if cs, err := r.Clusters([]string{"rjwrn", "nope"}); err != nil || len(cs) != 1 {
			t.Errorf("clusters = %+v, %v", cs, err)
		}
		if cs, err := r.Clusters(nil); err != nil || len(cs) != 0 {
			t.Errorf("clusters of no account = %+v, %v", cs, err)
		}
		u, err := r.User("A@X")
		if err != nil || u.Email != "a@x" || len(u.Accounts) != 1 || u.Accounts[0] != "rjwrn" {
			t.Errorf("user by another case = %+v, %v", u, err)
		}
		svc, err := r.Service("wg1")
		if err != nil || svc.Subnet != sub || svc.Address().String() != "100.100.1.1" || !svc.CreatedAt.Equal(T0) || svc.Port != 32768 ||
			svc.RelayURL != "https://{ingress}:8443/relay" {
			t.Errorf("service = %+v, %v", svc, err)
		}
		m, err := r.InFlightMove("wg1")
		if err != nil || m.ID != "m1" || m.PrepareVersion != 9 || len(m.Warnings) != 1 || !m.StartedAt.Equal(T0) {
			t.Errorf("move = %+v, %v", m, err)
		}
		if ms, err := r.InFlightMoves(); err != nil || len(ms) != 1 {
			t.Errorf("moves in flight = %+v, %v", ms, err)
		}
		if i, err := r.FreeServiceSubnetIndex(1, 255); err != nil || i != 2 {
			t.Errorf("free subnet index = %d, %v", i, err)
		}
		return nil
	})
	// Switch records: once per key.
	update(t, s, func(w store.Writer) error {
		for i, want := range []bool{true, false} {
			if added, err := w.AddMoveSwitched("m1", "k1"); err != nil || added != want {
				t.Errorf("add switched #%d = %v, %v", i+1, added, err)
			}
		}
		if ok, err := w.MoveSwitched("m1", "k1"); err != nil || !ok {
			t.Errorf("switched = %v, %v", ok, err)
		}
		m, _ := w.Move("m1")
		m.State, m.Steps = "done", nil
		return w.UpdateMove(m)
	})
	view(t, s, func(r store.Reader) error {
		if _, err := r.InFlightMove("wg1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("in-flight move after done: %v", err)
		}
		return nil
	})
	// A service on an unknown node breaks the foreign key: nothing is written.
	if _, err := s.Update(ctx, func(w store.Writer) error {
		return w.PutService(model.Service{ID: "wg2", CID: "ky3", NodeID: "n9", SubnetIndex: 3, Subnet: sub})
	}); err == nil {
		t.Fatal("service on unknown node accepted")
	}
	update(t, s, func(w store.Writer) error { return w.DeleteNode("ky3", "n2") })
	view(t, s, func(r store.Reader) error {
		if _, err := r.Node("ky3", "n2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted node: %v", err)
		}
		return nil
	})
}

func testFreeIndex(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	update(t, s, func(w store.Writer) error {
		for i, idx := range []int{2, 3, 5} {
			if err := w.PutDevice(model.Device{ID: string(rune('a' + i)), User: "a@x", PublicKey: string(rune('A' + i)), AddrIndex: idx}); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(r store.Reader) error {
		if i, err := r.FreeDeviceAddrIndex(2, 10); err != nil || i != 6 {
			t.Errorf("next = %d, %v; want 6", i, err)
		}
		if i, err := r.FreeDeviceAddrIndex(2, 5); err != nil || i != 4 {
			t.Errorf("gap = %d, %v; want 4", i, err)
		}
		if _, err := r.FreeDeviceAddrIndex(2, 3); !errors.Is(err, store.ErrPoolFull) {
			t.Errorf("full pool: %v", err)
		}
		if i, err := r.FreeDeviceAddrIndex(100, 200); err != nil || i != 100 {
			t.Errorf("empty range = %d, %v", i, err)
		}
		if n, err := r.CountDevices(); err != nil || n != 3 {
			t.Errorf("count = %d, %v", n, err)
		}
		return nil
	})
	// A second device with the same address index or key is ErrExists.
	for _, d := range []model.Device{{ID: "x", User: "a@x", PublicKey: "X", AddrIndex: 2}, {ID: "y", User: "a@x", PublicKey: "A", AddrIndex: 9}} {
		if _, err := s.Update(ctx, func(w store.Writer) error { return w.PutDevice(d) }); !errors.Is(err, store.ErrExists) {
			t.Errorf("device %+v: %v, want ErrExists", d, err)
		}
	}
}

func testPeers(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	update(t, s, func(w store.Writer) error {
		for i, st := range []struct {
			state string
			exp   time.Time
		}{{model.SessionLive, T0.Add(time.Hour)}, {model.SessionLive, T0.Add(-time.Second)}, {model.SessionEnded, T0.Add(time.Hour)}} {
			id := string(rune('a' + i))
			if err := w.PutSession(model.Session{ID: "s" + id, TokenHash: "h" + id, User: "a@x", State: st.state, ExpiresAt: st.exp, CreatedAt: T0}); err != nil {
				return err
			}
			if err := w.PutDevice(model.Device{ID: "d" + id, User: "a@x", PublicKey: "k" + id, AddrIndex: 2 + i,
				Address: netip.MustParseAddr(fmt.Sprintf("100.96.0.%d", 2+i)), SessionID: "s" + id, CreatedAt: T0}); err != nil {
				return err
			}
			if _, err := w.JoinCluster("d"+id, "ky3"); err != nil {
				return err
			}
		}
		again, err := w.JoinCluster("da", "ky3")
		if err != nil || again {
			t.Errorf("second join = %v, %v", again, err)
		}
		return nil
	})
	view(t, s, func(r store.Reader) error {
		ps, err := r.Peers("ky3", T0)
		if err != nil || len(ps) != 1 || ps[0].DeviceID != "da" || ps[0].PublicKey != "ka" || ps[0].Address.String() != "100.96.0.2" ||
			!ps[0].ExpiresAt.Equal(T0.Add(time.Hour)) || ps[0].User != "a@x" {
			t.Errorf("peers = %+v, %v", ps, err)
		}
		for cid, want := range map[string]int{"ky3": 1, "xym": 0} {
			if n, err := r.PeerCount(cid, T0); err != nil || n != want {
				t.Errorf("peer count of %s = %d, %v; want %d", cid, n, err, want)
			}
		}
		next, ok, err := r.NextExpiry()
		if err != nil || !ok || !next.Equal(T0.Add(-time.Second)) {
			t.Errorf("next expiry = %v %v %v", next, ok, err)
		}
		exp, _ := r.LiveSessionsExpiringBy(T0)
		if len(exp) != 1 || exp[0].ID != "sb" {
			t.Errorf("expiring = %+v", exp)
		}
		if d, err := r.DeviceByKey("kb"); err != nil || d.ID != "db" || d.SessionID != "sb" || !d.CreatedAt.Equal(T0) {
			t.Errorf("device by key = %+v, %v", d, err)
		}
		if ds, err := r.DevicesOfSession("sa"); err != nil || len(ds) != 1 || ds[0].ID != "da" {
			t.Errorf("devices of session = %+v, %v", ds, err)
		}
		if cids, err := r.DeviceClusters("da"); err != nil || len(cids) != 1 || cids[0] != "ky3" {
			t.Errorf("device clusters = %v, %v", cids, err)
		}
		if sess, err := r.SessionByToken("ha"); err != nil || sess.ID != "sa" || !sess.ExpiresAt.Equal(T0.Add(time.Hour)) {
			t.Errorf("session by token = %+v, %v", sess, err)
		}
		if _, ok, err := r.FirstEnded(); err != nil || !ok {
			t.Errorf("first ended = %v, %v", ok, err)
		}
		return nil
	})
	// Forgetting a session unbinds its device rather than deleting it.
	update(t, s, func(w store.Writer) error {
		sc, _ := w.Session("sc")
		sc.EndedAt = T0.Add(-48 * time.Hour)
		if err := w.UpdateSession(sc); err != nil {
			return err
		}
		n, err := w.DeleteSessionsEndedBy(T0)
		if n != 1 {
			t.Errorf("forgot %d sessions", n)
		}
		if left, err := w.LeaveCluster("da", "ky3"); err != nil || !left {
			t.Errorf("leave = %v, %v", left, err)
		}
		if left, err := w.LeaveCluster("da", "ky3"); err != nil || left {
			t.Errorf("second leave = %v, %v", left, err)
		}
		return err
	})
	view(t, s, func(r store.Reader) error {
		d, err := r.Device("dc")
		if err != nil || d.SessionID != "" {
			t.Errorf("device of a forgotten session = %+v, %v", d, err)
		}
		if n, _ := r.PeerCount("ky3", T0); n != 0 {
			t.Errorf("peers after the only live one left: %d", n)
		}
		return nil
	})
}

func testInstalling(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	update(t, s, func(w store.Writer) error {
		if err := w.PutCluster(model.Cluster{CID: "xym", AID: "rjwrn", Name: "tc2-xym", DomainRoot: "example.com"}); err != nil {
			return err
		}
		if err := w.PutNode(model.Node{CID: "xym", NID: "n1", EnrollmentTokenHash: "enr-xym"}); err != nil {
			return err
		}
		for i, c := range []struct{ cid, state string }{{"ky3", "installing"}, {"xym", "serving"}} {
			if err := w.PutService(model.Service{ID: fmt.Sprint("wg", i), CID: c.cid, NodeID: "n1", State: c.state, SubnetIndex: i + 1,
				Subnet: netip.MustParsePrefix(fmt.Sprintf("100.100.%d.0/24", i+1)), CreatedAt: T0}); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(r store.Reader) error {
		svcs, err := r.InstallingServices()
		if err != nil || len(svcs) != 1 || svcs[0].ID != "wg0" {
			t.Errorf("installing = %+v, %v", svcs, err)
		}
		return nil
	})
}

func testPing(t *testing.T, open func(*testing.T) store.Store) {
	if err := open(t).Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
