package sqlstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// lastActive is model.Device.LastActive in SQL.
func (t *tx) lastActive() string {
	return t.s.sql.greatest + "(d.created_at, d.last_seen, d.last_handshake, d.revoked_at)"
}

// noLiveSession holds for a device d whose bound session is not live at
// the time given as the parameter.
const noLiveSession = `NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = d.session_id AND s.state = 'live' AND s.expires_at > ?)`

// prefixed is deviceCols with each column of table d.
var prefixed = "d." + strings.ReplaceAll(deviceCols, ", ", ", d.")

func (t *tx) Devices(f store.DeviceFilter) ([]model.Device, error) {
	if len(f.AIDs) == 0 {
		return nil, nil
	}
	q := "SELECT " + prefixed + " FROM devices d WHERE EXISTS (SELECT 1 FROM user_accounts ua WHERE ua.email = d.email AND ua.aid IN (" + marks(len(f.AIDs)) + "))"
	args := anyArgs(f.AIDs)
	if f.User != "" {
		q += " AND lower(d.email) = lower(?)"
		args = append(args, f.User)
	}
	if f.CID != "" {
		q += " AND EXISTS (SELECT 1 FROM memberships m WHERE m.device_id = d.id AND m.cid = ?)"
		args = append(args, f.CID)
	}
	return list(t.conn, "devices", scanDevice, q+" ORDER BY d.id", args...)
}

func (t *tx) Memberships(deviceID string) ([]model.Membership, error) {
	return list(t.conn, "clusters of device "+deviceID, func(r sqlcol.Row) (model.Membership, error) {
		var m model.Membership
		var hs int64
		err := r.Scan(&m.CID, &hs)
		m.LastHandshake = sqlcol.Time(hs)
		return m, err
	}, "SELECT cid, last_handshake FROM memberships WHERE device_id = ? ORDER BY cid", deviceID)
}

func (t *tx) CountUserDevices(email string) (int, error) {
	var n int
	err := t.row("SELECT COUNT(*) FROM devices WHERE lower(email) = lower(?)", email).Scan(&n)
	return n, t.fail(err, "count devices of "+email)
}

func (t *tx) KeyRevoked(publicKey string) (model.RevokedKey, error) {
	var k model.RevokedKey
	var at int64
	err := t.row("SELECT public_key, device_id, email, revoked_at, revoked_by FROM revoked_keys WHERE public_key = ?",
		publicKey).Scan(&k.PublicKey, &k.DeviceID, &k.User, &at, &k.RevokedBy)
	k.RevokedAt = sqlcol.Time(at)
	return k, t.one(err, "revoked key")
}

func (t *tx) IdleDevices(cutoff, now time.Time, limit int) ([]model.Device, error) {
	return list(t.conn, "idle devices", scanDevice, "SELECT "+prefixed+" FROM devices d WHERE "+t.lastActive()+" <= ? AND "+noLiveSession+
		" ORDER BY "+t.lastActive()+", d.id LIMIT ?", sqlcol.Nanos(cutoff), sqlcol.Nanos(now), limit)
}

func (t *tx) NextIdle(now time.Time) (time.Time, bool, error) {
	n, ok, err := t.nanos("next idle device", "SELECT MIN("+t.lastActive()+") FROM devices d WHERE "+noLiveSession, sqlcol.Nanos(now))
	// created_at of 0 would read as the zero time; a real device has one.
	return time.Unix(0, n).UTC(), ok, err
}

func (t *tx) LiveSessionsOfUser(email string, now time.Time) ([]model.Session, error) {
	return list(t.conn, "sessions of "+email, scanSession, "SELECT "+sessionCols+` FROM sessions
		WHERE lower(email) = lower(?) AND state = 'live' AND expires_at > ? ORDER BY created_at, id`, email, sqlcol.Nanos(now))
}

func (t *tx) DeleteDevice(id string) error {
	return t.update("device "+id, "DELETE FROM devices WHERE id = ?", id)
}

func (t *tx) SetDeviceSeen(id string, at time.Time) error {
	_, err := t.exec("UPDATE devices SET last_seen = ? WHERE id = ? AND last_seen < ?", sqlcol.Nanos(at), id, sqlcol.Nanos(at))
	return t.fail(err, fmt.Sprintf("device %s seen", id))
}

func (t *tx) SetHandshake(deviceID, cid string, at time.Time) (bool, error) {
	res, err := t.exec("UPDATE memberships SET last_handshake = ? WHERE device_id = ? AND cid = ? AND last_handshake < ?",
		sqlcol.Nanos(at), deviceID, cid, sqlcol.Nanos(at))
	n, err := t.affected(res, err, fmt.Sprintf("handshake of %s with %s", deviceID, cid))
	if err != nil || n == 0 {
		return false, err
	}
	_, err = t.exec("UPDATE devices SET last_handshake = ? WHERE id = ? AND last_handshake < ?", sqlcol.Nanos(at), deviceID, sqlcol.Nanos(at))
	return err == nil, t.fail(err, "handshake of "+deviceID)
}

func (t *tx) PutRevokedKey(k model.RevokedKey) error {
	return t.insert("revoked key of device "+k.DeviceID, "INSERT INTO revoked_keys (public_key, device_id, email, revoked_at, revoked_by) VALUES (?, ?, ?, ?, ?)",
		k.PublicKey, k.DeviceID, k.User, sqlcol.Nanos(k.RevokedAt), k.RevokedBy)
}
