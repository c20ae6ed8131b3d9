package sqlitestore

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/oauth/storetest"
	"github.com/runos/vpn/control/store"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMigrationsFromEmptyAndRerun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	s := open(t, path)
	var n int
	if err := s.w.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil || n != SchemaVersion() {
		t.Fatalf("schema_migrations rows = %d (%v), want %d", n, err, SchemaVersion())
	}
	var fk int
	if err := s.r.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d (%v)", fk, err)
	}
	seedBasics(t, s)
	s.Close()
	// Re-opening applies nothing twice and keeps the data.
	s2 := open(t, path)
	if err := s2.w.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil || n != SchemaVersion() {
		t.Fatalf("after reopen: %d rows (%v)", n, err)
	}
	err := s2.View(context.Background(), func(r store.Reader) error {
		_, err := r.Cluster("ky3")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	s := open(t, path)
	if _, err := s.w.Exec("INSERT INTO schema_migrations VALUES (?, 0)", SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(context.Background(), path, nil); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
}

func seedBasics(t *testing.T, s *Store) {
	t.Helper()
	_, err := s.Update(context.Background(), func(w store.Writer) error {
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
	if err != nil {
		t.Fatal(err)
	}
}

func TestUpdateBumpsVersionsAndRollsBack(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	ctx := context.Background()
	seedBasics(t, s)
	ch, err := s.Update(ctx, func(w store.Writer) error {
		w.Touch("device:d1", "cluster:ky3", "device:d1")
		return nil
	})
	if err != nil || ch.Version != 2 || len(ch.Topics) != 2 {
		t.Fatalf("change = %+v, %v; want version 2 with 2 topics", ch, err)
	}
	// No topic touched: no version.
	ch, err = s.Update(ctx, func(w store.Writer) error { return nil })
	if err != nil || ch.Version != 0 {
		t.Fatalf("empty change = %+v, %v", ch, err)
	}
	// A failing change leaves nothing behind, not even its version bump.
	boom := errors.New("refused")
	_, err = s.Update(ctx, func(w store.Writer) error {
		if err := w.PutAccount(model.Account{AID: "other"}); err != nil {
			return err
		}
		w.Touch("cluster:xym")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	err = s.View(ctx, func(r store.Reader) error {
		if _, err := r.Account("other"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("account of a rolled-back change: %v", err)
		}
		g, _ := r.GlobalVersion()
		v, _ := r.TopicVersion("cluster:ky3", "device:d1")
		x, _ := r.TopicVersion("cluster:xym")
		all, _ := r.AllTopicVersions()
		if g != 2 || v != 2 || x != 0 || len(all) != 2 {
			t.Errorf("global %d, ky3/d1 %d, xym %d, all %v", g, v, x, all)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Duplicate keys are ErrExists.
	_, err = s.Update(ctx, func(w store.Writer) error { return w.PutAccount(model.Account{AID: "rjwrn"}) })
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate account: %v", err)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	ctx := context.Background()
	seedBasics(t, s)
	sub := netip.MustParsePrefix("100.100.1.0/24")
	_, err := s.Update(ctx, func(w store.Writer) error {
		n, err := w.Node("ky3", "n1")
		if err != nil {
			return err
		}
		n.LastHeartbeat = t0
		n.Published = true
		n.Roles = []string{"control-plane", "worker"}
		if err := w.UpdateNode(n); err != nil {
			return err
		}
		if err := w.PutService(model.Service{ID: "wg1", CID: "ky3", Name: "vpn", NodeID: "n1", Port: 32768, State: "installing", SubnetIndex: 1, Subnet: sub, CreatedAt: t0}); err != nil {
			return err
		}
		return w.PutMove(model.Move{ID: "m1", CID: "ky3", ServiceID: "wg1", FromNodeID: "n1", TargetNodeID: "n2", State: "preparing",
			Warnings: []string{"w"}, StartedAt: t0, PrepareVersion: 9})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(r store.Reader) error {
		n, err := r.NodeByEnrollmentToken("enr-n1")
		if err != nil || !n.LastHeartbeat.Equal(t0) || !n.Published || !n.IsControlPlane() || n.DeclaredIngress.String() != "10.77.0.21" {
			t.Errorf("node = %+v, %v", n, err)
		}
		svc, err := r.Service("wg1")
		if err != nil || svc.Subnet != sub || svc.Address().String() != "100.100.1.1" {
			t.Errorf("service = %+v, %v", svc, err)
		}
		m, err := r.InFlightMove("wg1")
		if err != nil || m.ID != "m1" || m.PrepareVersion != 9 || len(m.Warnings) != 1 || !m.StartedAt.Equal(t0) {
			t.Errorf("move = %+v, %v", m, err)
		}
		if i, err := r.FreeServiceSubnetIndex(1, 255); err != nil || i != 2 {
			t.Errorf("free subnet index = %d, %v", i, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A service on an unknown node breaks the foreign key: nothing is written.
	_, err = s.Update(ctx, func(w store.Writer) error {
		return w.PutService(model.Service{ID: "wg2", CID: "ky3", NodeID: "n9", SubnetIndex: 3, Subnet: sub})
	})
	if err == nil {
		t.Fatal("service on unknown node accepted")
	}
}

func TestFreeIndexFillsGapsWhenFull(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	ctx := context.Background()
	seedBasics(t, s)
	_, err := s.Update(ctx, func(w store.Writer) error {
		for i, idx := range []int{2, 3, 5} {
			if err := w.PutDevice(model.Device{ID: string(rune('a' + i)), User: "a@x", PublicKey: string(rune('A' + i)), AddrIndex: idx}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.View(ctx, func(r store.Reader) error {
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
		return nil
	})
}

func TestPeersAreLiveSessionsOnly(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	ctx := context.Background()
	seedBasics(t, s)
	_, err := s.Update(ctx, func(w store.Writer) error {
		for i, st := range []struct {
			state string
			exp   time.Time
		}{{model.SessionLive, t0.Add(time.Hour)}, {model.SessionLive, t0.Add(-time.Second)}, {model.SessionEnded, t0.Add(time.Hour)}} {
			id := string(rune('a' + i))
			if err := w.PutSession(model.Session{ID: "s" + id, TokenHash: "h" + id, User: "a@x", State: st.state, ExpiresAt: st.exp}); err != nil {
				return err
			}
			if err := w.PutDevice(model.Device{ID: "d" + id, User: "a@x", PublicKey: "k" + id, AddrIndex: 2 + i,
				Address: netip.MustParseAddr("100.96.0.2"), SessionID: "s" + id}); err != nil {
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
	if err != nil {
		t.Fatal(err)
	}
	_ = s.View(ctx, func(r store.Reader) error {
		ps, err := r.Peers("ky3", t0)
		if err != nil || len(ps) != 1 || ps[0].DeviceID != "da" {
			t.Errorf("peers = %+v, %v", ps, err)
		}
		for cid, want := range map[string]int{"ky3": 1, "xym": 0} {
			if n, err := r.PeerCount(cid, t0); err != nil || n != want {
				t.Errorf("peer count of %s = %d, %v; want %d", cid, n, err, want)
			}
		}
		next, ok, err := r.NextExpiry()
		if err != nil || !ok || !next.Equal(t0.Add(-time.Second)) {
			t.Errorf("next expiry = %v %v %v", next, ok, err)
		}
		exp, _ := r.LiveSessionsExpiringBy(t0)
		if len(exp) != 1 || exp[0].ID != "sb" {
			t.Errorf("expiring = %+v", exp)
		}
		return nil
	})
	// Forgetting a session unbinds its device rather than deleting it.
	_, err = s.Update(ctx, func(w store.Writer) error {
		sc, _ := w.Session("sc")
		sc.EndedAt = t0.Add(-48 * time.Hour)
		if err := w.UpdateSession(sc); err != nil {
			return err
		}
		n, err := w.DeleteSessionsEndedBy(t0)
		if n != 1 {
			t.Errorf("forgot %d sessions", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.View(ctx, func(r store.Reader) error {
		d, err := r.Device("dc")
		if err != nil || d.SessionID != "" {
			t.Errorf("device of a forgotten session = %+v, %v", d, err)
		}
		return nil
	})
}

func TestTakeAuthCodeOnce(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	ctx := context.Background()
	seedBasics(t, s)
	g := s.Grants()
	if err := g.PutAuthCode(ctx, oauth.AuthCode{CodeHash: "c1", ClientID: "runos-cli", User: "a@x", ExpiresAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := g.TakeAuthCode(ctx, "c1")
			if err == nil && c.User == "a@x" {
				mu.Lock()
				got++
				mu.Unlock()
			} else if !errors.Is(err, oauth.ErrNotFound) {
				t.Errorf("take: %v", err)
			}
		}()
	}
	wg.Wait()
	if got != 1 {
		t.Fatalf("code taken %d times, want once", got)
	}
}

func TestDeviceCodes(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	ctx := context.Background()
	g := s.Grants()
	d := oauth.DeviceCode{DeviceCodeHash: "h", UserCode: "BCDF-GHJK", ClientID: "runos-cli", ExpiresAt: t0.Add(10 * time.Minute), Interval: time.Second}
	if err := g.PutDeviceCode(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, err := g.DeviceCodeByUserCode(ctx, "BCDF-GHJK")
	if err != nil || got.Interval != time.Second || !got.ExpiresAt.Equal(d.ExpiresAt) {
		t.Fatalf("by user code = %+v, %v", got, err)
	}
	got.Approved, got.User, got.LastPoll = true, "a@x", t0
	if err := g.UpdateDeviceCode(ctx, got); err != nil {
		t.Fatal(err)
	}
	got, err = g.DeviceCodeByHash(ctx, "h")
	if err != nil || !got.Approved || got.User != "a@x" || !got.LastPoll.Equal(t0) {
		t.Fatalf("by hash = %+v, %v", got, err)
	}
	if err := g.DeleteDeviceCode(ctx, "h"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.DeviceCodeByHash(ctx, "h"); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := g.UpdateDeviceCode(ctx, got); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("update of a deleted code: %v", err)
	}
}

func TestGrantStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oauth.GrantStore {
		// The contract's entries are dated 2026-03-01 09:00; purge relative to then.
		s, err := Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), func() time.Time {
			return time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Grants()
	})
}
