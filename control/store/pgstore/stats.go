package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

var _ store.StatsReader = (*Store)(nil)

// Stats counts live sessions and devices by state in one read snapshot.
func (s *Store) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	st := store.Stats{Devices: map[string]int{store.DeviceConnected: 0, store.DeviceSignedIn: 0, store.DeviceSignedOut: 0, store.DeviceRevoked: 0}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		at := sqlcol.Nanos(now)
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM sessions WHERE state = 'live' AND expires_at > $1`, at).Scan(&st.LiveSessions); err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		rows, err := tx.Query(ctx, `
SELECT CASE
	WHEN d.revoked_at <> 0 THEN $1::text
	WHEN s.id IS NULL OR s.state <> 'live' OR s.expires_at <= $2 THEN $3::text
	WHEN EXISTS (SELECT 1 FROM memberships m WHERE m.device_id = d.id) THEN $4::text
	ELSE $5::text END AS st, COUNT(*)
FROM devices d LEFT JOIN sessions s ON s.id = d.session_id
GROUP BY st`, store.DeviceRevoked, at, store.DeviceSignedOut, store.DeviceConnected, store.DeviceSignedIn)
		if err != nil {
			return fmt.Errorf("devices: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var state string
			var n int
			if err := rows.Scan(&state, &n); err != nil {
				return fmt.Errorf("devices: %w", err)
			}
			st.Devices[state] = n
		}
		return rows.Err()
	})
	if err != nil {
		return st, fmt.Errorf("stats: %w", classify(err))
	}
	return st, nil
}
