package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// grants is the oauth.GrantStore on the same database, so that several
// replicas share pending codes. Entries past their expiry (plus a minute's
// grace, so the OAuth server can still say "expired") are purged on write.
type grants struct{ s *Store }

const grantGrace = time.Minute

func (g grants) write(ctx context.Context, fn func(t *tx) error) error {
	_, err := g.s.Update(ctx, func(w store.Writer) error {
		t := w.(*tx)
		cut := sqlcol.Nanos(g.s.now().Add(-grantGrace))
		if _, err := t.exec("DELETE FROM oauth_codes WHERE expires_at < ?", cut); err != nil {
			return err
		}
		if _, err := t.exec("DELETE FROM oauth_device_codes WHERE expires_at < ?", cut); err != nil {
			return err
		}
		return fn(t)
	})
	return err
}

func (g grants) PutAuthCode(ctx context.Context, c oauth.AuthCode) error {
	return g.write(ctx, func(t *tx) error {
		_, err := t.exec(`INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, user, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`, c.CodeHash, c.ClientID, c.RedirectURI, c.CodeChallenge, c.User, sqlcol.Nanos(c.ExpiresAt))
		return constraint(err, "authorization code")
	})
}

// TakeAuthCode deletes and returns the code in one statement, so a code
// raced by two requests is handed to one of them only.
func (g grants) TakeAuthCode(ctx context.Context, codeHash string) (oauth.AuthCode, error) {
	var c oauth.AuthCode
	err := g.write(ctx, func(t *tx) error {
		var exp int64
		err := t.q.QueryRowContext(t.ctx, `DELETE FROM oauth_codes WHERE code_hash = ?
			RETURNING code_hash, client_id, redirect_uri, code_challenge, user, expires_at`, codeHash).
			Scan(&c.CodeHash, &c.ClientID, &c.RedirectURI, &c.CodeChallenge, &c.User, &exp)
		c.ExpiresAt = sqlcol.Time(exp)
		return err
	})
	if err != nil {
		if isNotFound(err) {
			return oauth.AuthCode{}, oauth.ErrNotFound
		}
		return oauth.AuthCode{}, fmt.Errorf("take authorization code: %w", err)
	}
	return c, nil
}

const deviceCodeCols = "device_code_hash, user_code, client_id, user, approved, denied, expires_at, interval_ns, last_poll"

func scanDeviceCode(row sqlcol.Row) (oauth.DeviceCode, error) {
	var d oauth.DeviceCode
	var approved, denied int
	var exp, interval, last int64
	err := row.Scan(&d.DeviceCodeHash, &d.UserCode, &d.ClientID, &d.User, &approved, &denied, &exp, &interval, &last)
	d.Approved, d.Denied = approved != 0, denied != 0
	d.ExpiresAt, d.Interval, d.LastPoll = sqlcol.Time(exp), time.Duration(interval), sqlcol.Time(last)
	return d, err
}

func (g grants) PutDeviceCode(ctx context.Context, d oauth.DeviceCode, now time.Time, maxPending int) error {
	return g.write(ctx, func(t *tx) error {
		if _, err := t.exec("DELETE FROM oauth_device_codes WHERE expires_at < ?", sqlcol.Nanos(now.Add(-grantGrace))); err != nil {
			return err
		}
		var pending int
		if err := t.q.QueryRowContext(t.ctx, "SELECT COUNT(*) FROM oauth_device_codes WHERE expires_at > ?", sqlcol.Nanos(now)).Scan(&pending); err != nil {
			return fmt.Errorf("count pending device codes: %w", err)
		}
		if pending >= maxPending {
			return oauth.ErrTooMany
		}
		_, err := t.exec("INSERT INTO oauth_device_codes ("+deviceCodeCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			d.DeviceCodeHash, d.UserCode, d.ClientID, d.User, b2i(d.Approved), b2i(d.Denied), sqlcol.Nanos(d.ExpiresAt), int64(d.Interval), sqlcol.Nanos(d.LastPoll))
		return constraint(err, "device code")
	})
}

func (g grants) readDeviceCode(ctx context.Context, where string, arg string) (oauth.DeviceCode, error) {
	var d oauth.DeviceCode
	err := g.s.View(ctx, func(r store.Reader) error {
		t := r.(*tx)
		var err error
		d, err = scanDeviceCode(t.q.QueryRowContext(t.ctx, "SELECT "+deviceCodeCols+" FROM oauth_device_codes WHERE "+where+" = ?", arg))
		return err
	})
	if err != nil {
		if isNotFound(err) {
			return oauth.DeviceCode{}, oauth.ErrNotFound
		}
		return oauth.DeviceCode{}, fmt.Errorf("device code: %w", err)
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
// code is decided or expired.
func (g grants) DecideDeviceCode(ctx context.Context, userCode, user string, approve bool, now time.Time) (oauth.DeviceCode, error) {
	var d oauth.DeviceCode
	if !approve {
		user = ""
	}
	err := g.write(ctx, func(t *tx) error {
		var err error
		d, err = scanDeviceCode(t.q.QueryRowContext(t.ctx, `UPDATE oauth_device_codes SET approved = ?, denied = ?, user = ?
			WHERE user_code = ? AND approved = 0 AND denied = 0 AND expires_at > ?
			RETURNING `+deviceCodeCols, b2i(approve), b2i(!approve), user, userCode, sqlcol.Nanos(now)))
		return err
	})
	if isNotFound(err) {
		return oauth.DeviceCode{}, oauth.ErrNotFound
	}
	if err != nil {
		return oauth.DeviceCode{}, fmt.Errorf("decide device code: %w", err)
	}
	return d, nil
}

// PollDeviceCode reads and writes the poll's columns in one write
// transaction (the only writer), never the decision's.
func (g grants) PollDeviceCode(ctx context.Context, hash string, poll func(oauth.DeviceCode) (time.Time, time.Duration)) (oauth.DeviceCode, error) {
	var d oauth.DeviceCode
	err := g.write(ctx, func(t *tx) error {
		var err error
		if d, err = scanDeviceCode(t.q.QueryRowContext(t.ctx, "SELECT "+deviceCodeCols+" FROM oauth_device_codes WHERE device_code_hash = ?", hash)); err != nil {
			return err
		}
		d.LastPoll, d.Interval = poll(d)
		_, err = t.exec("UPDATE oauth_device_codes SET last_poll = ?, interval_ns = ? WHERE device_code_hash = ?", sqlcol.Nanos(d.LastPoll), int64(d.Interval), hash)
		return err
	})
	if isNotFound(err) {
		return oauth.DeviceCode{}, oauth.ErrNotFound
	}
	if err != nil {
		return oauth.DeviceCode{}, fmt.Errorf("record a device code poll: %w", err)
	}
	return d, nil
}

func (g grants) DeleteDeviceCode(ctx context.Context, hash string) error {
	err := g.write(ctx, func(t *tx) error {
		res, err := t.exec("DELETE FROM oauth_device_codes WHERE device_code_hash = ?", hash)
		return mustAffect(res, err, "device code")
	})
	if isNotFound(err) {
		return oauth.ErrNotFound
	}
	return err
}

// Count reads and writes the counters in one write transaction: SQLite's
// single writer is the lock. Expired counters are deleted on the way.
func (g grants) Count(ctx context.Context, now time.Time, keys []string, fn func([]oauth.Counter) []oauth.Counter) error {
	_, err := g.s.Update(ctx, func(w store.Writer) error {
		t := w.(*tx)
		if _, err := t.exec("DELETE FROM throttle WHERE expires_at <= ?", sqlcol.Nanos(now)); err != nil {
			return err
		}
		cur := make([]oauth.Counter, len(keys))
		for i, k := range keys {
			var n int
			var first, last, exp int64
			err := t.q.QueryRowContext(t.ctx, "SELECT n, first, last, expires_at FROM throttle WHERE key = ?", k).Scan(&n, &first, &last, &exp)
			switch {
			case err == nil:
				cur[i] = oauth.Counter{N: n, First: sqlcol.Time(first), Last: sqlcol.Time(last), Expires: sqlcol.Time(exp)}
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		next := fn(append([]oauth.Counter(nil), cur...))
		for i, k := range keys {
			c := next[i]
			if c == cur[i] {
				continue
			}
			var err error
			if c.Expires.IsZero() || !now.Before(c.Expires) {
				_, err = t.exec("DELETE FROM throttle WHERE key = ?", k)
			} else {
				_, err = t.exec(`INSERT INTO throttle (key, n, first, last, expires_at) VALUES (?, ?, ?, ?, ?)
					ON CONFLICT (key) DO UPDATE SET n = excluded.n, first = excluded.first, last = excluded.last, expires_at = excluded.expires_at`,
					k, c.N, sqlcol.Nanos(c.First), sqlcol.Nanos(c.Last), sqlcol.Nanos(c.Expires))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count sign-in attempts: %w", err)
	}
	return nil
}
