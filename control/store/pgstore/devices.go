package pgstore

import (
	"fmt"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

const deviceCols = "id, email, name, os, public_key, addr_index, address, session_id, created_at, last_seen, last_handshake, revoked_at, revoked_by"

func scanDevice(row sqlcol.Row) (model.Device, error) {
	var d model.Device
	var addr string
	var sid *string
	var created, seen, hs, revoked int64
	if err := row.Scan(&d.ID, &d.User, &d.Name, &d.OS, &d.PublicKey, &d.AddrIndex, &addr, &sid, &created,
		&seen, &hs, &revoked, &d.RevokedBy); err != nil {
		return d, err
	}
	d.Address = sqlcol.ParseAddr(addr)
	if sid != nil {
		d.SessionID = *sid
	}
	d.CreatedAt, d.LastSeen, d.LastHandshake, d.RevokedAt = sqlcol.Time(created), sqlcol.Time(seen), sqlcol.Time(hs), sqlcol.Time(revoked)
	return d, nil
}

func (t *tx) Device(id string) (model.Device, error) {
	d, err := scanDevice(t.row("SELECT "+deviceCols+" FROM devices WHERE id = $1", id))
	return d, one(err, "device "+id)
}

func (t *tx) DeviceByKey(publicKey string) (model.Device, error) {
	d, err := scanDevice(t.row("SELECT "+deviceCols+" FROM devices WHERE public_key = $1", publicKey))
	return d, one(err, "device with that public key")
}

func (t *tx) DevicesOfSession(sessionID string) ([]model.Device, error) {
	return list(t, "devices of session", scanDevice, "SELECT "+deviceCols+" FROM devices WHERE session_id = $1 ORDER BY id", sessionID)
}

func (t *tx) DeviceClusters(deviceID string) ([]string, error) {
	return list(t, "clusters of device "+deviceID, sqlcol.String, "SELECT cid FROM memberships WHERE device_id = $1 ORDER BY cid", deviceID)
}

func (t *tx) FreeDeviceAddrIndex(lo, hi int) (int, error) {
	return freeIndex(t, "devices", "addr_index", lo, hi)
}

func (t *tx) CountDevices() (int, error) {
	var n int
	err := t.row("SELECT COUNT(*) FROM devices").Scan(&n)
	return n, one(err, "count devices")
}

func deviceArgs(d model.Device) []any {
	return []any{d.User, d.Name, d.OS, d.PublicKey, d.AddrIndex, sqlcol.Addr(d.Address), sqlcol.Nullable(d.SessionID), sqlcol.Nanos(d.CreatedAt),
		sqlcol.Nanos(d.LastSeen), sqlcol.Nanos(d.LastHandshake), sqlcol.Nanos(d.RevokedAt), d.RevokedBy}
}

func (t *tx) PutDevice(d model.Device) error {
	return t.insert("device "+d.ID, "INSERT INTO devices ("+deviceCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)", append([]any{d.ID}, deviceArgs(d)...)...)
}

func (t *tx) UpdateDevice(d model.Device) error {
	tag, err := t.exec(`UPDATE devices SET email = $1, name = $2, os = $3, public_key = $4, addr_index = $5, address = $6,
		session_id = $7, created_at = $8, last_seen = $9, last_handshake = $10, revoked_at = $11, revoked_by = $12 WHERE id = $13`,
		append(deviceArgs(d), d.ID)...)
	if err != nil {
		return constraint(err, "device "+d.ID)
	}
	return mustAffect(tag, nil, "device "+d.ID)
}

func (t *tx) JoinCluster(deviceID, cid string) (bool, error) {
	tag, err := t.exec("INSERT INTO memberships (device_id, cid) VALUES ($1, $2) ON CONFLICT DO NOTHING", deviceID, cid)
	if err != nil {
		return false, fmt.Errorf("join %s to %s: %w", deviceID, cid, classify(err))
	}
	return tag.RowsAffected() > 0, nil
}

func (t *tx) LeaveCluster(deviceID, cid string) (bool, error) {
	tag, err := t.exec("DELETE FROM memberships WHERE device_id = $1 AND cid = $2", deviceID, cid)
	if err != nil {
		return false, fmt.Errorf("leave %s from %s: %w", deviceID, cid, classify(err))
	}
	return tag.RowsAffected() > 0, nil
}

// peersFrom is what Peers selects from; PeerCount counts the same rows.
const peersFrom = `FROM memberships m
		JOIN devices d ON d.id = m.device_id
		JOIN sessions s ON s.id = d.session_id
		WHERE m.cid = $1 AND d.revoked_at = 0 AND s.state = 'live' AND s.expires_at > $2`

func (t *tx) Peers(cid string, now time.Time) ([]model.Peer, error) {
	return list(t, "peers of "+cid, func(r sqlcol.Row) (model.Peer, error) {
		var p model.Peer
		var addr string
		var exp int64
		err := r.Scan(&p.DeviceID, &p.PublicKey, &addr, &exp)
		p.Address, p.ExpiresAt = sqlcol.ParseAddr(addr), sqlcol.Time(exp)
		return p, err
	}, `SELECT d.id, d.public_key, d.address, s.expires_at `+peersFrom+` ORDER BY d.id`, cid, sqlcol.Nanos(now))
}

func (t *tx) PeerCount(cid string, now time.Time) (int, error) {
	var n int
	err := t.row(`SELECT COUNT(*) `+peersFrom, cid, sqlcol.Nanos(now)).Scan(&n)
	return n, one(err, "count peers of "+cid)
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
	s, err := scanSession(t.row("SELECT "+sessionCols+" FROM sessions WHERE id = $1", id))
	return s, one(err, "session "+id)
}

func (t *tx) SessionByToken(hash string) (model.Session, error) {
	s, err := scanSession(t.row("SELECT "+sessionCols+" FROM sessions WHERE token_hash = $1", hash))
	return s, one(err, "session")
}

func (t *tx) LiveSessionsExpiringBy(at time.Time) ([]model.Session, error) {
	return list(t, "expiring sessions", scanSession,
		"SELECT "+sessionCols+" FROM sessions WHERE state = 'live' AND expires_at <= $1 ORDER BY expires_at", sqlcol.Nanos(at))
}

func (t *tx) firstTime(what, sql string) (time.Time, bool, error) {
	var n *int64
	if err := t.row(sql).Scan(&n); err != nil {
		return time.Time{}, false, fmt.Errorf("%s: %w", what, classify(err))
	}
	if n == nil {
		return time.Time{}, false, nil
	}
	return sqlcol.Time(*n), true, nil
}

func (t *tx) NextExpiry() (time.Time, bool, error) {
	return t.firstTime("next session expiry", "SELECT MIN(expires_at) FROM sessions WHERE state = 'live'")
}

func (t *tx) FirstEnded() (time.Time, bool, error) {
	return t.firstTime("first ended session", "SELECT MIN(ended_at) FROM sessions WHERE state <> 'live'")
}

func (t *tx) PutSession(s model.Session) error {
	return t.insert("session "+s.ID, "INSERT INTO sessions ("+sessionCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		s.ID, s.TokenHash, s.User, s.ClientID, s.State, sqlcol.Nanos(s.CreatedAt), sqlcol.Nanos(s.ExpiresAt), sqlcol.Nanos(s.EndedAt))
}

func (t *tx) UpdateSession(s model.Session) error {
	tag, err := t.exec("UPDATE sessions SET state = $1, expires_at = $2, ended_at = $3 WHERE id = $4",
		s.State, sqlcol.Nanos(s.ExpiresAt), sqlcol.Nanos(s.EndedAt), s.ID)
	return mustAffect(tag, err, "session "+s.ID)
}

func (t *tx) DeleteSessionsEndedBy(at time.Time) (int, error) {
	tag, err := t.exec("DELETE FROM sessions WHERE state <> 'live' AND ended_at <= $1", sqlcol.Nanos(at))
	if err != nil {
		return 0, fmt.Errorf("forget old sessions: %w", classify(err))
	}
	return int(tag.RowsAffected()), nil
}
