package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// grants is the oauth.GrantStore on the same database, shared by every
// replica. Grants and counters change in transactions of their own, not
// as changes: they concern no topic, and a flood of device-code requests
// must not queue every change behind it on PostgreSQL. Entries past their
// expiry (plus a minute's grace, so the OAuth server can still say
// "expired") are deleted on the way.
type grants struct{ s *Store }

const grantGrace = time.Minute

// tx runs fn in a write transaction, tried again while the database
// refuses it as transient (fn only reads and writes the grants' rows).
func (g grants) tx(ctx context.Context, what string, fn func(conn) error) error {
	err := g.attempt(ctx, fn)
	for i := 1; i < attempts && err != nil && g.s.d.transient(err); i++ {
		err = g.attempt(ctx, fn)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.Is(err, oauth.ErrNotFound):
		return oauth.ErrNotFound
	case err == nil, errors.Is(err, oauth.ErrTooMany):
		return err
	}
	return fmt.Errorf("%s: %w", what, g.s.d.classify(err))
}

func (g grants) attempt(ctx context.Context, fn func(conn) error) error {
	t, err := g.s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer t.Rollback()
	if err := fn(g.s.on(ctx, t)); err != nil {
		return err
	}
	return t.Commit()
}

// one maps a single statement's outcome: no row is oauth.ErrNotFound.
func (g grants) one(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return oauth.ErrNotFound
	}
	return fmt.Errorf("%s: %w", what, g.s.d.classify(err))
}

func purge(c conn, now time.Time) error {
	cut := sqlcol.Nanos(now.Add(-grantGrace))
	if _, err := c.exec("DELETE FROM oauth_codes WHERE expires_at < ?", cut); err != nil {
		return err
	}
	_, err := c.exec("DELETE FROM oauth_device_codes WHERE expires_at < ?", cut)
	return err
}

func (g grants) PutAuthCode(ctx context.Context, c oauth.AuthCode) error {
	return g.tx(ctx, "store authorization code", func(t conn) error {
		if err := purge(t, g.s.now()); err != nil {
			return err
		}
		return t.insert("authorization code", `INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, email, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`, c.CodeHash, c.ClientID, c.RedirectURI, c.CodeChallenge, c.User, sqlcol.Nanos(c.ExpiresAt))
	})
}

// TakeAuthCode deletes and returns the code in one statement, so a code
// raced by two requests (on two replicas) is handed to one of them only.
func (g grants) TakeAuthCode(ctx context.Context, codeHash string) (oauth.AuthCode, error) {
	var c oauth.AuthCode
	var exp int64
	err := g.s.on(ctx, g.s.w).row(`DELETE FROM oauth_codes WHERE code_hash = ?
		RETURNING code_hash, client_id, redirect_uri, code_challenge, email, expires_at`, codeHash).
		Scan(&c.CodeHash, &c.ClientID, &c.RedirectURI, &c.CodeChallenge, &c.User, &exp)
	c.ExpiresAt = sqlcol.Time(exp)
	if err := g.one(err, "take authorization code"); err != nil {
		return oauth.AuthCode{}, err
	}
	return c, nil
}

const deviceCodeCols = "device_code_hash, user_code, client_id, email, approved, denied, expires_at, interval_ns, last_poll"

func scanDeviceCode(row sqlcol.Row) (oauth.DeviceCode, error) {
	var d oauth.DeviceCode
	var exp, interval, last int64
	err := row.Scan(&d.DeviceCodeHash, &d.UserCode, &d.ClientID, &d.User, &d.Approved, &d.Denied, &exp, &interval, &last)
	d.ExpiresAt, d.Interval, d.LastPoll = sqlcol.Time(exp), time.Duration(interval), sqlcol.Time(last)
	return d, err
}

// deviceCodesLock serializes the puts of device codes across replicas, so
// that the cap of pending codes holds.
const deviceCodesLock = "runos-control device codes"

func (g grants) PutDeviceCode(ctx context.Context, d oauth.DeviceCode, now time.Time, maxPending int) error {
	return g.tx(ctx, "store device code", func(t conn) error {
		if err := g.s.d.lock(t, deviceCodesLock); err != nil {
			return err
		}
		if err := purge(t, now); err != nil {
			return err
		}
		var pending int
		if err := t.row("SELECT COUNT(*) FROM oauth_device_codes WHERE expires_at > ?", sqlcol.Nanos(now)).Scan(&pending); err != nil {
			return err
		}
		if pending >= maxPending {
			return oauth.ErrTooMany
		}
		return t.insert("device code", "INSERT INTO oauth_device_codes ("+deviceCodeCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			d.DeviceCodeHash, d.UserCode, d.ClientID, d.User, d.Approved, d.Denied, sqlcol.Nanos(d.ExpiresAt), int64(d.Interval), sqlcol.Nanos(d.LastPoll))
	})
}

func (g grants) readDeviceCode(ctx context.Context, where string, arg string) (oauth.DeviceCode, error) {
	d, err := scanDeviceCode(g.s.on(ctx, g.s.r).row("SELECT "+deviceCodeCols+" FROM oauth_device_codes WHERE "+where+" = ?", arg))
	if err := g.one(err, "device code"); err != nil {
		return oauth.DeviceCode{}, err
	}
	return d, nil
}

func (g grants) DeviceCodeByUserCode(ctx context.Context, userCode string) (oauth.DeviceCode, error) {
	return g.readDeviceCode(ctx, "user_code", userCode)
}

func (g grants) DeviceCodeByHash(ctx context.Context, hash string) (oauth.DeviceCode, error) {
	return g.readDeviceCode(ctx, "device_code_hash", hash)
}

// DecideDeviceCode is one conditional UPDATE: it changes nothing once the
// code is decided or expired, whichever replica asks.
func (g grants) DecideDeviceCode(ctx context.Context, userCode, user string, approve bool, now time.Time) (oauth.DeviceCode, error) {
	if !approve {
		user = ""
	}
	d, err := scanDeviceCode(g.s.on(ctx, g.s.w).row(`UPDATE oauth_device_codes SET approved = ?, denied = ?, email = ?
		WHERE user_code = ? AND NOT approved AND NOT denied AND expires_at > ?
		RETURNING `+deviceCodeCols, approve, !approve, user, userCode, sqlcol.Nanos(now)))
	if err := g.one(err, "decide device code"); err != nil {
		return oauth.DeviceCode{}, err
	}
	return d, nil
}

// PollDeviceCode locks the code's row, lets poll decide, and writes the
// poll's columns only.
func (g grants) PollDeviceCode(ctx context.Context, hash string, poll func(oauth.DeviceCode) (time.Time, time.Duration)) (oauth.DeviceCode, error) {
	var d oauth.DeviceCode
	err := g.tx(ctx, "record a device code poll", func(t conn) error {
		var err error
		if d, err = scanDeviceCode(t.row("SELECT "+deviceCodeCols+" FROM oauth_device_codes WHERE device_code_hash = ?"+g.s.sql.forUpdate, hash)); err != nil {
			return err
		}
		d.LastPoll, d.Interval = poll(d)
		_, err = t.exec("UPDATE oauth_device_codes SET last_poll = ?, interval_ns = ? WHERE device_code_hash = ?", sqlcol.Nanos(d.LastPoll), int64(d.Interval), hash)
		return err
	})
	if err != nil {
		return oauth.DeviceCode{}, err
	}
	return d, nil
}

func (g grants) DeleteDeviceCode(ctx context.Context, hash string) error {
	c := g.s.on(ctx, g.s.w)
	res, err := c.exec("DELETE FROM oauth_device_codes WHERE device_code_hash = ?", hash)
	n, err := c.affected(res, err, "delete device code")
	if err == nil && n == 0 {
		return oauth.ErrNotFound
	}
	return err
}

// Count locks the counters' rows (made first if missing, in key order so
// that two counts never wait on each other), lets fn decide, and writes
// back what changed. Expired counters read as zero; some are deleted on
// the way, skipping any another count holds.
func (g grants) Count(ctx context.Context, now time.Time, keys []string, fn func([]oauth.Counter) []oauth.Counter) error {
	c := g.s.on(ctx, g.s.w)
	if _, err := c.exec(`DELETE FROM throttle WHERE key IN (
		SELECT key FROM throttle WHERE expires_at <= ? LIMIT 100`+g.s.sql.forUpdate+g.s.sql.skipLocked+`)`, sqlcol.Nanos(now)); err != nil {
		return c.fail(err, "count sign-in attempts")
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(keys)))
	return g.tx(ctx, "count sign-in attempts", func(t conn) error {
		cur, err := counters(t, now, keys, sorted)
		if err != nil {
			return err
		}
		next := fn(slices.Clone(cur))
		for i, k := range keys {
			c := next[i]
			var err error
			if c.Expires.IsZero() || !now.Before(c.Expires) {
				_, err = t.exec("DELETE FROM throttle WHERE key = ?", k)
			} else if c != cur[i] {
				_, err = t.exec("UPDATE throttle SET n = ?, first = ?, last = ?, expires_at = ? WHERE key = ?",
					c.N, sqlcol.Nanos(c.First), sqlcol.Nanos(c.Last), sqlcol.Nanos(c.Expires), k)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// counters makes the rows of keys (sorted: the order they are locked in)
// and reads them locked, in the order of keys.
func counters(t conn, now time.Time, keys, sorted []string) ([]oauth.Counter, error) {
	cur := make([]oauth.Counter, len(keys))
	if len(sorted) == 0 {
		return cur, nil
	}
	if _, err := t.exec("INSERT INTO throttle (key, n, first, last, expires_at) VALUES "+tuples(len(sorted), "(?, 0, 0, 0, 0)")+
		" ON CONFLICT (key) DO NOTHING", anyArgs(sorted)...); err != nil {
		return nil, err
	}
	type row struct {
		key string
		c   oauth.Counter
	}
	read, err := list(t, "counters", func(r sqlcol.Row) (row, error) {
		var x row
		var first, last, exp int64
		err := r.Scan(&x.key, &x.c.N, &first, &last, &exp)
		if exp > sqlcol.Nanos(now) {
			x.c = oauth.Counter{N: x.c.N, First: sqlcol.Time(first), Last: sqlcol.Time(last), Expires: sqlcol.Time(exp)}
		} else {
			x.c = oauth.Counter{}
		}
		return x, err
	}, "SELECT key, n, first, last, expires_at FROM throttle WHERE key IN ("+marks(len(sorted))+") ORDER BY key"+t.s.sql.forUpdate, anyArgs(sorted)...)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]oauth.Counter, len(read))
	for _, r := range read {
		byKey[r.key] = r.c
	}
	for i, k := range keys {
		cur[i] = byKey[k]
	}
	return cur, nil
}
