package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

var _ store.StatsReader = (*Store)(nil)

// Stats counts live sessions and devices by state in one read snapshot.
func (s *Store) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	st := store.Stats{Devices: map[string]int{store.DeviceConnected: 0, store.DeviceSignedIn: 0, store.DeviceSignedOut: 0, store.DeviceRevoked: 0}}
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	at := sqlcol.Nanos(now)
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions WHERE state = 'live' AND expires_at > ?`, at).Scan(&st.LiveSessions); err != nil {
		return st, fmt.Errorf("stats: sessions: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `
SELECT CASE
	WHEN d.revoked_at <> 0 THEN ?
	WHEN s.id IS NULL OR s.state <> 'live' OR s.expires_at <= ? THEN ?
	WHEN EXISTS (SELECT 1 FROM memberships m WHERE m.device_id = d.id) THEN ?
	ELSE ? END AS st, COUNT(*)
FROM devices d LEFT JOIN sessions s ON s.id = d.session_id
GROUP BY st`, store.DeviceRevoked, at, store.DeviceSignedOut, store.DeviceConnected, store.DeviceSignedIn)
	if err != nil {
		return st, fmt.Errorf("stats: devices: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return st, fmt.Errorf("stats: devices: %w", err)
		}
		st.Devices[state] = n
	}
	return st, rows.Err()
}
