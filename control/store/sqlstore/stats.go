package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// deviceStates counts devices by store.Device* state.
const deviceStates = `
SELECT CASE
	WHEN d.revoked_at <> 0 THEN '` + store.DeviceRevoked + `'
	WHEN s.id IS NULL OR s.state <> 'live' OR s.expires_at <= ? THEN '` + store.DeviceSignedOut + `'
	WHEN EXISTS (SELECT 1 FROM memberships m WHERE m.device_id = d.id) THEN '` + store.DeviceConnected + `'
	ELSE '` + store.DeviceSignedIn + `' END AS st, COUNT(*)
FROM devices d LEFT JOIN sessions s ON s.id = d.session_id
GROUP BY st`

// Stats counts live sessions and devices by state in one read snapshot.
func (s *Store) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	st := store.Stats{Devices: map[string]int{store.DeviceConnected: 0, store.DeviceSignedIn: 0, store.DeviceSignedOut: 0, store.DeviceRevoked: 0}}
	err := s.View(ctx, func(r store.Reader) error {
		t := r.(*tx)
		at := sqlcol.Nanos(now)
		if err := t.row(`SELECT COUNT(*) FROM sessions WHERE state = 'live' AND expires_at > ?`, at).Scan(&st.LiveSessions); err != nil {
			return t.fail(err, "sessions")
		}
		type count struct {
			state string
			n     int
		}
		counts, err := list(t.conn, "devices", func(r sqlcol.Row) (count, error) {
			var c count
			return c, r.Scan(&c.state, &c.n)
		}, deviceStates, at)
		for _, c := range counts {
			st.Devices[c.state] = c.n
		}
		return err
	})
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}
