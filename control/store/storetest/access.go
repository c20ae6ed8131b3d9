package storetest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// The operators' view of who is on the VPN (issue 12): devices and idle
// clean-up, API tokens, the audit log, and the counts for metrics.

func testDevicesAndIdle(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	ctx := context.Background()
	seedBasics(t, s)
	_, err := s.Update(ctx, func(w store.Writer) error {
		if err := w.PutAccount(model.Account{AID: "other"}); err != nil {
			return err
		}
		if err := w.PutUser(model.User{Email: "B@x", Accounts: []string{"other"}}); err != nil {
			return err
		}
		if err := w.PutSession(model.Session{ID: "live", TokenHash: "h1", User: "a@x", State: model.SessionLive, ExpiresAt: T0.Add(time.Hour)}); err != nil {
			return err
		}
		devs := []model.Device{
			{ID: "d1", User: "a@x", SessionID: "live", CreatedAt: T0.Add(-40 * 24 * time.Hour)}, // old but live: never idle
			{ID: "d2", User: "a@x", CreatedAt: T0.Add(-40 * 24 * time.Hour)},                    // idle since then
			{ID: "d3", User: "a@x", CreatedAt: T0.Add(-40 * 24 * time.Hour), LastSeen: T0.Add(-2 * 24 * time.Hour)},
			{ID: "d4", User: "B@x", CreatedAt: T0.Add(-35 * 24 * time.Hour)},
		}
		for i, d := range devs {
			d.PublicKey, d.AddrIndex, d.Address = "k"+d.ID, 2+i, netip.MustParseAddr(fmt.Sprintf("100.96.0.%d", 2+i))
			if err := w.PutDevice(d); err != nil {
				return err
			}
		}
		if _, err := w.JoinCluster("d1", "ky3"); err != nil {
			return err
		}
		if _, err := w.JoinCluster("d2", "ky3"); err != nil {
			return err
		}
		// A handshake makes d2 recently active; an older one changes nothing.
		if ok, err := w.SetHandshake("d2", "ky3", T0.Add(-time.Hour)); !ok || err != nil {
			return fmt.Errorf("set handshake = %v, %v", ok, err)
		}
		if ok, _ := w.SetHandshake("d2", "ky3", T0.Add(-2*time.Hour)); ok {
			return errors.New("an older handshake was recorded")
		}
		if ok, _ := w.SetHandshake("d3", "ky3", T0); ok {
			return errors.New("a handshake of a cluster the device did not join was recorded")
		}
		return w.SetDeviceSeen("d4", T0.Add(-31*24*time.Hour))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.View(ctx, func(r store.Reader) error {
		ids := func(ds []model.Device, err error) string {
			if err != nil {
				return err.Error()
			}
			out := ""
			for _, d := range ds {
				out += d.ID + " "
			}
			return out
		}
		for _, c := range []struct {
			f    store.DeviceFilter
			want string
		}{
			{store.DeviceFilter{AIDs: []string{"rjwrn"}}, "d1 d2 d3 "},
			{store.DeviceFilter{AIDs: []string{"other"}}, "d4 "},
			{store.DeviceFilter{AIDs: []string{"rjwrn", "other"}, User: "b@X"}, "d4 "},
			{store.DeviceFilter{AIDs: []string{"rjwrn"}, CID: "ky3"}, "d1 d2 "},
			{store.DeviceFilter{}, ""},
		} {
			if got := ids(r.Devices(c.f)); got != c.want {
				t.Errorf("Devices(%+v) = %q, want %q", c.f, got, c.want)
			}
		}
		ms, err := r.Memberships("d2")
		if err != nil || len(ms) != 1 || !ms[0].LastHandshake.Equal(T0.Add(-time.Hour)) {
			t.Errorf("memberships of d2 = %+v, %v", ms, err)
		}
		if n, _ := r.CountUserDevices("A@X"); n != 3 {
			t.Errorf("devices of a@x = %d", n)
		}
		cutoff := T0.Add(-30 * 24 * time.Hour)
		if got := ids(r.IdleDevices(cutoff, T0, 10)); got != "d4 " {
			t.Errorf("idle devices = %q", got)
		}
		next, ok, err := r.NextIdle(T0)
		if err != nil || !ok || !next.Equal(T0.Add(-31*24*time.Hour)) {
			t.Errorf("next idle = %v %v %v", next, ok, err)
		}
		// Once the session lapses d1 is the oldest of all.
		if got := ids(r.IdleDevices(cutoff, T0.Add(2*time.Hour), 1)); got != "d1 " {
			t.Errorf("idle after the session lapsed = %q", got)
		}
		ss, err := r.LiveSessionsOfUser("A@x", T0)
		if err != nil || len(ss) != 1 || ss[0].ID != "live" {
			t.Errorf("live sessions = %+v, %v", ss, err)
		}
		if _, err := r.KeyRevoked("kd1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unrevoked key: %v", err)
		}
		return nil
	})
	_, err = s.Update(ctx, func(w store.Writer) error {
		if err := w.PutRevokedKey(model.RevokedKey{PublicKey: "kd1", DeviceID: "d1", User: "a@x", RevokedAt: T0, RevokedBy: "ops"}); err != nil {
			return err
		}
		if err := w.PutRevokedKey(model.RevokedKey{PublicKey: "kd1", DeviceID: "d1"}); !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("revoking twice: %v", err)
		}
		d, err := w.Device("d1")
		if err != nil {
			return err
		}
		d.RevokedAt, d.RevokedBy = T0, "ops"
		if err := w.UpdateDevice(d); err != nil {
			return err
		}
		return w.DeleteDevice("d2")
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.View(ctx, func(r store.Reader) error {
		k, err := r.KeyRevoked("kd1")
		if err != nil || k.DeviceID != "d1" || !k.RevokedAt.Equal(T0) {
			t.Errorf("revoked key = %+v, %v", k, err)
		}
		if ps, _ := r.Peers("ky3", T0); len(ps) != 0 {
			t.Errorf("a revoked device is a peer: %+v", ps)
		}
		if _, err := r.Device("d2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted device: %v", err)
		}
		if ms, _ := r.Memberships("d2"); len(ms) != 0 {
			t.Errorf("memberships outlive the device: %+v", ms)
		}
		if idx, _ := r.FreeDeviceAddrIndex(2, 10); idx != 6 {
			t.Errorf("free index = %d", idx)
		}
		return nil
	})
}

func testAPITokens(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	ctx := context.Background()
	seedBasics(t, s)
	tok := model.APIToken{ID: "tok-1", AID: "rjwrn", Name: "ci", Hash: "h1", CreatedAt: T0, CreatedBy: "a@x", ExpiresAt: T0.Add(time.Hour)}
	_, err := s.Update(ctx, func(w store.Writer) error {
		if err := w.PutAPIToken(tok); err != nil {
			return err
		}
		dup := tok
		dup.ID, dup.Hash = "tok-2", "h2"
		if err := w.PutAPIToken(dup); !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("a second live token named ci: %v", err)
		}
		tok.RevokedAt, tok.RevokedBy = T0, "a@x"
		if err := w.UpdateAPIToken(tok); err != nil {
			return err
		}
		return w.PutAPIToken(dup) // the name is free again once revoked
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.View(ctx, func(r store.Reader) error {
		ks, err := r.APITokens("rjwrn")
		if err != nil || len(ks) != 2 || ks[0].RevokedAt.IsZero() || !ks[1].RevokedAt.IsZero() {
			t.Errorf("tokens = %+v, %v", ks, err)
		}
		k, err := r.APITokenByHash("h1")
		if err != nil || k.ID != "tok-1" || !k.Expired(T0.Add(time.Hour)) || k.Expired(T0) {
			t.Errorf("by hash = %+v, %v", k, err)
		}
		return nil
	})
}

func testAuditLog(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	ctx := context.Background()
	seedBasics(t, s)
	entries := []audit.Entry{
		{AIDs: []string{"rjwrn"}, Actor: audit.User("a@x"), Kind: audit.SignedIn, Target: "ses-1"},
		{AIDs: []string{"rjwrn"}, Actor: audit.User("a@x"), Kind: audit.DeviceJoined, CID: "ky3", Target: "d1"},
		{AIDs: []string{"rjwrn", "other"}, Actor: audit.Token("ci"), Kind: audit.DeviceRevoked, Target: "d1"},
		{AIDs: []string{"other"}, Actor: audit.User("b@x"), Kind: audit.SignedIn},
		{AIDs: []string{"rjwrn"}, Actor: audit.Control, Kind: "device_x", Target: "wildcard"},
	}
	ch, err := s.Update(ctx, func(w store.Writer) error {
		for i, e := range entries {
			e.At = T0.Add(time.Duration(i) * time.Second)
			if err := audit.Record(w, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || len(ch.Topics) != 2 || ch.Topics[0] != "account:rjwrn" {
		t.Fatalf("record: %+v, %v", ch, err)
	}
	_ = s.View(ctx, func(r store.Reader) error {
		kinds := func(f store.AuditFilter) string {
			es, err := r.AuditEntries(f)
			if err != nil {
				return err.Error()
			}
			out := ""
			for _, e := range es {
				out += fmt.Sprintf("%d:%s ", e.ID, e.Kind)
			}
			return out
		}
		rj := []string{"rjwrn"}
		for _, c := range []struct {
			f    store.AuditFilter
			want string
		}{
			{store.AuditFilter{AIDs: rj}, "5:device_x 3:device.revoked 2:device.joined 1:session.signed_in "},
			{store.AuditFilter{AIDs: rj, Limit: 2}, "5:device_x 3:device.revoked "},
			{store.AuditFilter{AIDs: rj, Limit: 2, Before: 3}, "2:device.joined 1:session.signed_in "},
			{store.AuditFilter{AIDs: rj, Kind: "device"}, "3:device.revoked 2:device.joined "},
			{store.AuditFilter{AIDs: rj, Kind: "device.joined"}, "2:device.joined "},
			{store.AuditFilter{AIDs: rj, Actor: "A@X"}, "2:device.joined 1:session.signed_in "},
			{store.AuditFilter{AIDs: rj, CID: "ky3"}, "2:device.joined "},
			{store.AuditFilter{AIDs: []string{"other"}}, "4:session.signed_in 3:device.revoked "},
			{store.AuditFilter{}, ""},
		} {
			if got := kinds(c.f); got != c.want {
				t.Errorf("%+v: %q, want %q", c.f, got, c.want)
			}
		}
		es, _ := r.AuditEntries(store.AuditFilter{AIDs: rj, Kind: audit.DeviceRevoked})
		if len(es) != 1 || es[0].Actor != audit.Token("ci") || len(es[0].AIDs) != 2 || !es[0].At.Equal(T0.Add(2*time.Second)) {
			t.Errorf("revoked entry = %+v", es)
		}
		return nil
	})
}

func testStatsCountSessionsAndDevicesByState(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	ctx := context.Background()
	seedBasics(t, s)
	_, err := s.Update(ctx, func(w store.Writer) error {
		for _, ses := range []model.Session{
			{ID: "s-live", TokenHash: "h1", User: "a@x", State: model.SessionLive, CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)},
			{ID: "s-live2", TokenHash: "h2", User: "a@x", State: model.SessionLive, CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)},
			{ID: "s-lapsed", TokenHash: "h3", User: "a@x", State: model.SessionLive, CreatedAt: T0, ExpiresAt: T0.Add(-time.Second)},
			{ID: "s-ended", TokenHash: "h4", User: "a@x", State: model.SessionEnded, CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)},
		} {
			if err := w.PutSession(ses); err != nil {
				return err
			}
		}
		for i, d := range []struct{ id, ses string }{{"d-joined", "s-live"}, {"d-idle", "s-live2"}, {"d-lapsed", "s-lapsed"}, {"d-ended", "s-ended"}, {"d-none", ""}, {"d-revoked", ""}} {
			dev := model.Device{ID: d.id, User: "a@x", PublicKey: d.id, AddrIndex: i + 1,
				Address: netip.AddrFrom4([4]byte{100, 96, 0, byte(i + 1)}), SessionID: d.ses, CreatedAt: T0}
			if d.id == "d-revoked" {
				dev.RevokedAt, dev.RevokedBy = T0, "ops"
			}
			if err := w.PutDevice(dev); err != nil {
				return err
			}
		}
		_, err := w.JoinCluster("d-joined", "ky3")
		if err != nil {
			return err
		}
		_, err = w.JoinCluster("d-lapsed", "ky3")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.(store.StatsReader).Stats(ctx, T0)
	if err != nil {
		t.Fatal(err)
	}
	if st.LiveSessions != 2 || st.Devices[store.DeviceConnected] != 1 || st.Devices[store.DeviceSignedIn] != 1 || st.Devices[store.DeviceSignedOut] != 3 ||
		st.Devices[store.DeviceRevoked] != 1 {
		t.Errorf("stats %+v; want 2 live sessions, devices 1 connected, 1 signed in, 3 signed out, 1 revoked", st)
	}
}
