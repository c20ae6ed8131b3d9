package sqlstore

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

const deviceCols = "id, email, name, os, public_key, addr_index, address, session_id, created_at, last_seen, last_handshake, revoked_at, revoked_by"

func scanDevice(row sqlcol.Row) (model.Device, error) {
	var d model.Device
	var addr string
	var sid sql.NullString
	var created, seen, hs, revoked int64
	if err := row.Scan(&d.ID, &d.User, &d.Name, &d.OS, &d.PublicKey, &d.AddrIndex, &addr, &sid, &created,
		&seen, &hs, &revoked, &d.RevokedBy); err != nil {
		return d, err
	}
	d.Address = sqlcol.ParseAddr(addr)
	d.SessionID = sid.String
	d.CreatedAt, d.LastSeen, d.LastHandshake, d.RevokedAt = sqlcol.Time(created), sqlcol.Time(seen), sqlcol.Time(hs), sqlcol.Time(revoked)
	return d, nil
}

func (t *tx) Device(id string) (model.Device, error) {
	d, err := scanDevice(t.row("SELECT "+deviceCols+" FROM devices WHERE id = ?", id))
	return d, t.one(err, "device "+id)
}

func (t *tx) DeviceByKey(publicKey string) (model.Device, error) {
	d, err := scanDevice(t.row("SELECT "+deviceCols+" FROM devices WHERE public_key = ?", publicKey))
	return d, t.one(err, "device with that public key")
}

func (t *tx) DevicesOfSession(sessionID string) ([]model.Device, error) {
	return list(t.conn, "devices of session", scanDevice, "SELECT "+deviceCols+" FROM devices WHERE session_id = ? ORDER BY id", sessionID)
}

func (t *tx) DeviceClusters(deviceID string) ([]string, error) {
	return list(t.conn, "clusters of device "+deviceID, sqlcol.String, "SELECT cid FROM memberships WHERE device_id = ? ORDER BY cid", deviceID)
}

func (t *tx) FreeDeviceAddrIndex(lo, hi int) (int, error) {
	return t.freeIndex("devices", "addr_index", lo, hi)
}

func (t *tx) CountDevices() (int, error) {
	var n int
	err := t.row("SELECT COUNT(*) FROM devices").Scan(&n)
	return n, t.fail(err, "count devices")
}

func deviceArgs(d model.Device) []any {
	return []any{d.User, d.Name, d.OS, d.PublicKey, d.AddrIndex, sqlcol.Addr(d.Address), sqlcol.Nullable(d.SessionID), sqlcol.Nanos(d.CreatedAt),
		sqlcol.Nanos(d.LastSeen), sqlcol.Nanos(d.LastHandshake), sqlcol.Nanos(d.RevokedAt), d.RevokedBy}
}

func (t *tx) PutDevice(d model.Device) error {
	return t.insert("device "+d.ID, "INSERT INTO devices ("+deviceCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", append([]any{d.ID}, deviceArgs(d)...)...)
}

func (t *tx) UpdateDevice(d model.Device) error {
	return t.update("device "+d.ID, `UPDATE devices SET email = ?, name = ?, os = ?, public_key = ?, addr_index = ?, address = ?,
		session_id = ?, created_at = ?, last_seen = ?, last_handshake = ?, revoked_at = ?, revoked_by = ? WHERE id = ?`,
		append(deviceArgs(d), d.ID)...)
}

func (t *tx) JoinCluster(deviceID, cid string) (bool, error) {
	res, err := t.exec("INSERT INTO memberships (device_id, cid) VALUES (?, ?) ON CONFLICT DO NOTHING", deviceID, cid)
	n, err := t.affected(res, err, fmt.Sprintf("join %s to %s", deviceID, cid))
	return n > 0, err
}

func (t *tx) LeaveCluster(deviceID, cid string) (bool, error) {
	res, err := t.exec("DELETE FROM memberships WHERE device_id = ? AND cid = ?", deviceID, cid)
	n, err := t.affected(res, err, fmt.Sprintf("leave %s from %s", deviceID, cid))
	return n > 0, err
}

// peersFrom is what Peers selects from; PeerCount counts the same rows.
const peersFrom = `FROM memberships m
		JOIN devices d ON d.id = m.device_id
		JOIN sessions s ON s.id = d.session_id
		WHERE m.cid = ? AND d.revoked_at = 0 AND s.state = 'live' AND s.expires_at > ?`

func (t *tx) Peers(cid string, now time.Time) ([]model.Peer, error) {
	return list(t.conn, "peers of "+cid, func(r sqlcol.Row) (model.Peer, error) {
		var p model.Peer
		var addr string
		var exp int64
		err := r.Scan(&p.DeviceID, &p.PublicKey, &addr, &exp, &p.User)
		p.Address, p.ExpiresAt = sqlcol.ParseAddr(addr), sqlcol.Time(exp)
		return p, err
	}, `SELECT d.id, d.public_key, d.address, s.expires_at, d.email `+peersFrom+` ORDER BY d.id`, cid, sqlcol.Nanos(now))
}

func (t *tx) PeerCount(cid string, now time.Time) (int, error) {
	var n int
	err := t.row(`SELECT COUNT(*) `+peersFrom, cid, sqlcol.Nanos(now)).Scan(&n)
	return n, t.fail(err, "count peers of "+cid)
}

// Sessions.

const sessionCols = "id, token_hash, email, client_id, state, created_at, expires_at, ended_at"

func scanSession(row sqlcol.Row) (model.Session, error) {
	var s model.Session
	var created, expires, ended int64
	err := row.Scan(&s.ID, &s.TokenHash, &s.User, &s.ClientID, &s.State, &created, &expires, &ended)
	s.CreatedAt, s.ExpiresAt, s.EndedAt = sqlcol.Time(created), sqlcol.Time(expires), sqlcol.Time(ended)
	return s, err
}

func (t *tx) Session(id string) (model.Session, error) {
	s, err := scanSession(t.row("SELECT "+sessionCols+" FROM sessions WHERE id = ?", id))
	return s, t.one(err, "session "+id)
}

func (t *tx) SessionByToken(hash string) (model.Session, error) {
	s, err := scanSession(t.row("SELECT "+sessionCols+" FROM sessions WHERE token_hash = ?", hash))
	return s, t.one(err, "session")
}

func (t *tx) LiveSessionsExpiringBy(at time.Time) ([]model.Session, error) {
	return list(t.conn, "expiring sessions", scanSession,
		"SELECT "+sessionCols+" FROM sessions WHERE state = 'live' AND expires_at <= ? ORDER BY expires_at", sqlcol.Nanos(at))
}

func (t *tx) NextExpiry() (time.Time, bool, error) {
	n, ok, err := t.nanos("next session expiry", "SELECT MIN(expires_at) FROM sessions WHERE state = 'live'")
	return sqlcol.Time(n), ok, err
}

func (t *tx) FirstEnded() (time.Time, bool, error) {
	n, ok, err := t.nanos("first ended session", "SELECT MIN(ended_at) FROM sessions WHERE state <> 'live'")
	return sqlcol.Time(n), ok, err
}

func (t *tx) PutSession(s model.Session) error {
	return t.insert("session "+s.ID, "INSERT INTO sessions ("+sessionCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		s.ID, s.TokenHash, s.User, s.ClientID, s.State, sqlcol.Nanos(s.CreatedAt), sqlcol.Nanos(s.ExpiresAt), sqlcol.Nanos(s.EndedAt))
}

func (t *tx) UpdateSession(s model.Session) error {
	return t.update("session "+s.ID, "UPDATE sessions SET state = ?, expires_at = ?, ended_at = ? WHERE id = ?",
		s.State, sqlcol.Nanos(s.ExpiresAt), sqlcol.Nanos(s.EndedAt), s.ID)
}

func (t *tx) DeleteSessionsEndedBy(at time.Time) (int, error) {
	res, err := t.exec("DELETE FROM sessions WHERE state <> 'live' AND ended_at <= ?", sqlcol.Nanos(at))
	n, err := t.affected(res, err, "forget old sessions")
	return int(n), err
}
