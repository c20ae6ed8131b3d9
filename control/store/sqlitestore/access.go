package sqlitestore

import (
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// lastActive is model.Device.LastActive in SQL.
const lastActive = "MAX(d.created_at, d.last_seen, d.last_handshake, d.revoked_at)"

// noLiveSession holds for a device d whose bound session is not live at
// the time given as the parameter.
const noLiveSession = `NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = d.session_id AND s.state = 'live' AND s.expires_at > ?)`

func (t *tx) Devices(f store.DeviceFilter) ([]model.Device, error) {
	if len(f.AIDs) == 0 {
		return nil, nil
	}
	cols := "d." + strings.ReplaceAll(deviceCols, ", ", ", d.")
	q := "SELECT " + cols + " FROM devices d WHERE EXISTS (SELECT 1 FROM user_accounts ua WHERE ua.email = d.user AND ua.aid IN (" +
		placeholders(len(f.AIDs)) + "))"
	args := anyArgs(f.AIDs)
	if f.User != "" {
		q += " AND d.user = ? COLLATE NOCASE"
		args = append(args, f.User)
	}
	if f.CID != "" {
		q += " AND EXISTS (SELECT 1 FROM memberships m WHERE m.device_id = d.id AND m.cid = ?)"
		args = append(args, f.CID)
	}
	return list(t, "devices", scanDevice, q+" ORDER BY d.id", args...)
}

func (t *tx) Memberships(deviceID string) ([]model.Membership, error) {
	return list(t, "clusters of device "+deviceID, func(r sqlcol.Row) (model.Membership, error) {
		var m model.Membership
		var hs int64
		err := r.Scan(&m.CID, &hs)
		m.LastHandshake = sqlcol.Time(hs)
		return m, err
	}, "SELECT cid, last_handshake FROM memberships WHERE device_id = ? ORDER BY cid", deviceID)
}

func (t *tx) CountUserDevices(email string) (int, error) {
	var n int
	if err := t.q.QueryRowContext(t.ctx, "SELECT COUNT(*) FROM devices WHERE user = ? COLLATE NOCASE", email).Scan(&n); err != nil {
		return 0, fmt.Errorf("count devices of %s: %w", email, err)
	}
	return n, nil
}

func (t *tx) KeyRevoked(publicKey string) (model.RevokedKey, error) {
	var k model.RevokedKey
	var at int64
	err := t.q.QueryRowContext(t.ctx, "SELECT public_key, device_id, user, revoked_at, revoked_by FROM revoked_keys WHERE public_key = ?",
		publicKey).Scan(&k.PublicKey, &k.DeviceID, &k.User, &at, &k.RevokedBy)
	k.RevokedAt = sqlcol.Time(at)
	return k, one(err, "revoked key")
}

func (t *tx) IdleDevices(cutoff, now time.Time, limit int) ([]model.Device, error) {
	cols := "d." + strings.ReplaceAll(deviceCols, ", ", ", d.")
	return list(t, "idle devices", scanDevice, "SELECT "+cols+" FROM devices d WHERE "+lastActive+" <= ? AND "+noLiveSession+
		" ORDER BY "+lastActive+", d.id LIMIT ?", sqlcol.Nanos(cutoff), sqlcol.Nanos(now), limit)
}

func (t *tx) NextIdle(now time.Time) (time.Time, bool, error) {
	var n sql.NullInt64
	if err := t.q.QueryRowContext(t.ctx, "SELECT MIN("+lastActive+") FROM devices d WHERE "+noLiveSession, sqlcol.Nanos(now)).Scan(&n); err != nil {
		return time.Time{}, false, fmt.Errorf("next idle device: %w", err)
	}
	if !n.Valid {
		return time.Time{}, false, nil
	}
	// created_at of 0 would read as the zero time; a real device has one.
	return time.Unix(0, n.Int64).UTC(), true, nil
}

func (t *tx) LiveSessionsOfUser(email string, now time.Time) ([]model.Session, error) {
	return list(t, "sessions of "+email, scanSession, "SELECT "+sessionCols+` FROM sessions
		WHERE user = ? COLLATE NOCASE AND state = 'live' AND expires_at > ? ORDER BY created_at, id`, email, sqlcol.Nanos(now))
}

func (t *tx) DeleteDevice(id string) error {
	res, err := t.exec("DELETE FROM devices WHERE id = ?", id)
	return mustAffect(res, err, "device "+id)
}

func (t *tx) SetDeviceSeen(id string, at time.Time) error {
	if _, err := t.exec("UPDATE devices SET last_seen = ? WHERE id = ? AND last_seen < ?", sqlcol.Nanos(at), id, sqlcol.Nanos(at)); err != nil {
		return fmt.Errorf("device %s seen: %w", id, err)
	}
	return nil
}

func (t *tx) SetHandshake(deviceID, cid string, at time.Time) (bool, error) {
	res, err := t.exec("UPDATE memberships SET last_handshake = ? WHERE device_id = ? AND cid = ? AND last_handshake < ?",
		sqlcol.Nanos(at), deviceID, cid, sqlcol.Nanos(at))
	if err != nil {
		return false, fmt.Errorf("handshake of %s with %s: %w", deviceID, cid, err)
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err
	}
	if _, err := t.exec("UPDATE devices SET last_handshake = ? WHERE id = ? AND last_handshake < ?", sqlcol.Nanos(at), deviceID, sqlcol.Nanos(at)); err != nil {
		return false, fmt.Errorf("handshake of %s: %w", deviceID, err)
	}
	return true, nil
}

func (t *tx) PutRevokedKey(k model.RevokedKey) error {
	_, err := t.exec("INSERT INTO revoked_keys (public_key, device_id, user, revoked_at, revoked_by) VALUES (?, ?, ?, ?, ?)",
		k.PublicKey, k.DeviceID, k.User, sqlcol.Nanos(k.RevokedAt), k.RevokedBy)
	return constraint(err, "revoked key of device "+k.DeviceID)
}
