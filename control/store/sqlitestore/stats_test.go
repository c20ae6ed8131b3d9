package sqlitestore

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

func TestStatsCountSessionsAndDevicesByState(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	ctx := context.Background()
	seedBasics(t, s)
	_, err := s.Update(ctx, func(w store.Writer) error {
		for _, ses := range []model.Session{
			{ID: "s-live", TokenHash: "h1", User: "a@x", State: model.SessionLive, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)},
			{ID: "s-live2", TokenHash: "h2", User: "a@x", State: model.SessionLive, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)},
			{ID: "s-lapsed", TokenHash: "h3", User: "a@x", State: model.SessionLive, CreatedAt: t0, ExpiresAt: t0.Add(-time.Second)},
			{ID: "s-ended", TokenHash: "h4", User: "a@x", State: model.SessionEnded, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)},
		} {
			if err := w.PutSession(ses); err != nil {
				return err
			}
		}
		for i, d := range []struct{ id, ses string }{{"d-joined", "s-live"}, {"d-idle", "s-live2"}, {"d-lapsed", "s-lapsed"}, {"d-ended", "s-ended"}, {"d-none", ""}, {"d-revoked", ""}} {
			dev := model.Device{ID: d.id, User: "a@x", PublicKey: d.id, AddrIndex: i + 1,
				Address: netip.AddrFrom4([4]byte{100, 96, 0, byte(i + 1)}), SessionID: d.ses, CreatedAt: t0}
			if d.id == "d-revoked" {
				dev.RevokedAt, dev.RevokedBy = t0, "ops"
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
	st, err := s.Stats(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	if st.LiveSessions != 2 || st.Devices[store.DeviceConnected] != 1 || st.Devices[store.DeviceSignedIn] != 1 || st.Devices[store.DeviceSignedOut] != 3 ||
		st.Devices[store.DeviceRevoked] != 1 {
		t.Errorf("stats %+v; want 2 live sessions, devices 1 connected, 1 signed in, 3 signed out, 1 revoked", st)
	}
}
