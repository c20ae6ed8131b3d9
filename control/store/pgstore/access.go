package pgstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// lastActive is model.Device.LastActive in SQL.
const lastActive = "GREATEST(d.created_at, d.last_seen, d.last_handshake, d.revoked_at)"

// noLiveSession holds for a device d whose bound session is not live at
// the time given as parameter $N (see noLiveSessionAt).
func noLiveSessionAt(n int) string {
	return `NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = d.session_id AND s.state = 'live' AND s.expires_at > $` + strconv.Itoa(n) + `)`
}

// prefixed is deviceCols with each column of table d.
var prefixed = "d." + strings.ReplaceAll(deviceCols, ", ", ", d.")

func (t *tx) Devices(f store.DeviceFilter) ([]model.Device, error) {
	if len(f.AIDs) == 0 {
		return nil, nil
	}
	q := "SELECT " + prefixed + " FROM devices d WHERE EXISTS (SELECT 1 FROM user_accounts ua WHERE ua.email = d.email AND ua.aid = ANY($1))"
	args := []any{f.AIDs}
	if f.User != "" {
		args = append(args, f.User)
		q += fmt.Sprintf(" AND lower(d.email) = lower($%d)", len(args))
	}
	if f.CID != "" {
		args = append(args, f.CID)
		q += fmt.Sprintf(" AND EXISTS (SELECT 1 FROM memberships m WHERE m.device_id = d.id AND m.cid = $%d)", len(args))
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
	}, "SELECT cid, last_handshake FROM memberships WHERE device_id = $1 ORDER BY cid", deviceID)
}

func (t *tx) CountUserDevices(email string) (int, error) {
	var n int
	err := t.row("SELECT COUNT(*) FROM devices WHERE lower(email) = lower($1)", email).Scan(&n)
	return n, one(err, "count devices of "+email)
}

func (t *tx) KeyRevoked(publicKey string) (model.RevokedKey, error) {
	var k model.RevokedKey
	var at int64
	err := t.row("SELECT public_key, device_id, email, revoked_at, revoked_by FROM revoked_keys WHERE public_key = $1",
		publicKey).Scan(&k.PublicKey, &k.DeviceID, &k.User, &at, &k.RevokedBy)
	k.RevokedAt = sqlcol.Time(at)
	return k, one(err, "revoked key")
}

func (t *tx) IdleDevices(cutoff, now time.Time, limit int) ([]model.Device, error) {
	return list(t, "idle devices", scanDevice, "SELECT "+prefixed+" FROM devices d WHERE "+lastActive+" <= $1 AND "+noLiveSessionAt(2)+
		" ORDER BY "+lastActive+", d.id LIMIT $3", sqlcol.Nanos(cutoff), sqlcol.Nanos(now), limit)
}

func (t *tx) NextIdle(now time.Time) (time.Time, bool, error) {
	var n *int64
	if err := t.row("SELECT MIN("+lastActive+") FROM devices d WHERE "+noLiveSessionAt(1), sqlcol.Nanos(now)).Scan(&n); err != nil {
		return time.Time{}, false, fmt.Errorf("next idle device: %w", classify(err))
	}
	if n == nil {
		return time.Time{}, false, nil
	}
	// created_at of 0 would read as the zero time; a real device has one.
	return time.Unix(0, *n).UTC(), true, nil
}

func (t *tx) LiveSessionsOfUser(email string, now time.Time) ([]model.Session, error) {
	return list(t, "sessions of "+email, scanSession, "SELECT "+sessionCols+` FROM sessions
		WHERE lower(email) = lower($1) AND state = 'live' AND expires_at > $2 ORDER BY created_at, id`, email, sqlcol.Nanos(now))
}

func (t *tx) DeleteDevice(id string) error {
	tag, err := t.exec("DELETE FROM devices WHERE id = $1", id)
	return mustAffect(tag, err, "device "+id)
}

func (t *tx) SetDeviceSeen(id string, at time.Time) error {
	if _, err := t.exec("UPDATE devices SET last_seen = $1 WHERE id = $2 AND last_seen < $1", sqlcol.Nanos(at), id); err != nil {
		return fmt.Errorf("device %s seen: %w", id, classify(err))
	}
	return nil
}

func (t *tx) SetHandshake(deviceID, cid string, at time.Time) (bool, error) {
	tag, err := t.exec("UPDATE memberships SET last_handshake = $1 WHERE device_id = $2 AND cid = $3 AND last_handshake < $1",
		sqlcol.Nanos(at), deviceID, cid)
	if err != nil {
		return false, fmt.Errorf("handshake of %s with %s: %w", deviceID, cid, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if _, err := t.exec("UPDATE devices SET last_handshake = $1 WHERE id = $2 AND last_handshake < $1", sqlcol.Nanos(at), deviceID); err != nil {
		return false, fmt.Errorf("handshake of %s: %w", deviceID, classify(err))
	}
	return true, nil
}

func (t *tx) PutRevokedKey(k model.RevokedKey) error {
	return t.insert("revoked key of device "+k.DeviceID, "INSERT INTO revoked_keys (public_key, device_id, email, revoked_at, revoked_by) VALUES ($1, $2, $3, $4, $5)",
		k.PublicKey, k.DeviceID, k.User, sqlcol.Nanos(k.RevokedAt), k.RevokedBy)
}
