package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// grants is the oauth.GrantStore on the same database, shared by every
// replica. Grants and counters change in transactions of their own, not
// under the version row's lock: they concern no topic, and a flood of
// device-code requests must not queue every other change behind it.
// Entries past their expiry (plus a minute's grace, so the OAuth server
// can still say "expired") are deleted on the way.
type grants struct{ s *Store }

const grantGrace = time.Minute

func (g grants) tx(ctx context.Context, what string, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, g.s.pool, fn)
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, oauth.ErrNotFound) {
		return oauth.ErrNotFound
	}
	if errors.Is(err, oauth.ErrTooMany) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, classify(err))
	}
	return nil
}

func (g grants) purge(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, now time.Time) error {
	cut := sqlcol.Nanos(now.Add(-grantGrace))
	if _, err := q.Exec(ctx, "DELETE FROM oauth_codes WHERE expires_at < $1", cut); err != nil {
		return err
	}
	_, err := q.Exec(ctx, "DELETE FROM oauth_device_codes WHERE expires_at < $1", cut)
	return err
}

func (g grants) PutAuthCode(ctx context.Context, c oauth.AuthCode) error {
	return g.tx(ctx, "store authorization code", func(t pgx.Tx) error {
		if err := g.purge(ctx, t, g.s.now()); err != nil {
			return err
		}
		_, err := t.Exec(ctx, `INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, email, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, c.CodeHash, c.ClientID, c.RedirectURI, c.CodeChallenge, c.User, sqlcol.Nanos(c.ExpiresAt))
		return constraint(err, "authorization code")
	})
}

// TakeAuthCode deletes and returns the code in one statement, so a code
// raced by two requests (on two replicas) is handed to one of them only.
func (g grants) TakeAuthCode(ctx context.Context, codeHash string) (oauth.AuthCode, error) {
	var c oauth.AuthCode
	var exp int64
	err := g.s.pool.QueryRow(ctx, `DELETE FROM oauth_codes WHERE code_hash = $1
		RETURNING code_hash, client_id, redirect_uri, code_challenge, email, expires_at`, codeHash).
		Scan(&c.CodeHash, &c.ClientID, &c.RedirectURI, &c.CodeChallenge, &c.User, &exp)
	c.ExpiresAt = sqlcol.Time(exp)
	if errors.Is(err, pgx.ErrNoRows) {
		return oauth.AuthCode{}, oauth.ErrNotFound
	}
	if err != nil {
		return oauth.AuthCode{}, fmt.Errorf("take authorization code: %w", classify(err))
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
	return g.tx(ctx, "store device code", func(t pgx.Tx) error {
		if _, err := t.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", deviceCodesLock); err != nil {
			return err
		}
		if err := g.purge(ctx, t, now); err != nil {
			return err
		}
		var pending int
		if err := t.QueryRow(ctx, "SELECT COUNT(*) FROM oauth_device_codes WHERE expires_at > $1", sqlcol.Nanos(now)).Scan(&pending); err != nil {
			return err
		}
		if pending >= maxPending {
			return oauth.ErrTooMany
		}
		_, err := t.Exec(ctx, "INSERT INTO oauth_device_codes ("+deviceCodeCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
			d.DeviceCodeHash, d.UserCode, d.ClientID, d.User, d.Approved, d.Denied, sqlcol.Nanos(d.ExpiresAt), int64(d.Interval), sqlcol.Nanos(d.LastPoll))
		return constraint(err, "device code")
	})
}

func (g grants) readDeviceCode(ctx context.Context, where string, arg string) (oauth.DeviceCode, error) {
	d, err := scanDeviceCode(g.s.pool.QueryRow(ctx, "SELECT "+deviceCodeCols+" FROM oauth_device_codes WHERE "+where+" = $1", arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return oauth.DeviceCode{}, oauth.ErrNotFound
	}
	if err != nil {
		return oauth.DeviceCode{}, fmt.Errorf("device code: %w", classify(err))
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
	d, err := scanDeviceCode(g.s.pool.QueryRow(ctx, `UPDATE oauth_device_codes SET approved = $1, denied = $2, email = $3
		WHERE user_code = $4 AND NOT approved AND NOT denied AND expires_at > $5
		RETURNING `+deviceCodeCols, approve, !approve, user, userCode, sqlcol.Nanos(now)))
	if errors.Is(err, pgx.ErrNoRows) {
		return oauth.DeviceCode{}, oauth.ErrNotFound
	}
	if err != nil {
		return oauth.DeviceCode{}, fmt.Errorf("decide device code: %w", classify(err))
	}
	return d, nil
}

// PollDeviceCode locks the code's row, lets poll decide, and writes the
// poll's columns only.
func (g grants) PollDeviceCode(ctx context.Context, hash string, poll func(oauth.DeviceCode) (time.Time, time.Duration)) (oauth.DeviceCode, error) {
	var d oauth.DeviceCode
	err := g.tx(ctx, "record a device code poll", func(t pgx.Tx) error {
		var err error
		if d, err = scanDeviceCode(t.QueryRow(ctx, "SELECT "+deviceCodeCols+" FROM oauth_device_codes WHERE device_code_hash = $1 FOR UPDATE", hash)); err != nil {
			return err
		}
		d.LastPoll, d.Interval = poll(d)
		_, err = t.Exec(ctx, "UPDATE oauth_device_codes SET last_poll = $1, interval_ns = $2 WHERE device_code_hash = $3", sqlcol.Nanos(d.LastPoll), int64(d.Interval), hash)
		return err
	})
	if err != nil {
		return oauth.DeviceCode{}, err
	}
	return d, nil
}

func (g grants) DeleteDeviceCode(ctx context.Context, hash string) error {
	tag, err := g.s.pool.Exec(ctx, "DELETE FROM oauth_device_codes WHERE device_code_hash = $1", hash)
	if err != nil {
		return fmt.Errorf("delete device code: %w", classify(err))
	}
	if tag.RowsAffected() == 0 {
		return oauth.ErrNotFound
	}
	return nil
}

// Count locks the counters' rows (made first if missing, in key order so
// that two counts never wait on each other), lets fn decide, and writes
// back what changed. Expired counters read as zero; some are deleted on
// the way, skipping any another count holds.
func (g grants) Count(ctx context.Context, now time.Time, keys []string, fn func([]oauth.Counter) []oauth.Counter) error {
	if _, err := g.s.pool.Exec(ctx, `DELETE FROM throttle WHERE key IN (
		SELECT key FROM throttle WHERE expires_at <= $1 LIMIT 100 FOR UPDATE SKIP LOCKED)`, sqlcol.Nanos(now)); err != nil {
		return fmt.Errorf("count sign-in attempts: %w", classify(err))
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	return g.tx(ctx, "count sign-in attempts", func(t pgx.Tx) error {
		if _, err := t.Exec(ctx, `INSERT INTO throttle (key, n, first, last, expires_at)
			SELECT unnest($1::text[]), 0, 0, 0, 0 ORDER BY 1 ON CONFLICT (key) DO NOTHING`, sorted); err != nil {
			return err
		}
		rows, err := t.Query(ctx, "SELECT key, n, first, last, expires_at FROM throttle WHERE key = ANY($1) ORDER BY key FOR UPDATE", sorted)
		if err != nil {
			return err
		}
		byKey := map[string]oauth.Counter{}
		for rows.Next() {
			var k string
			var n int
			var first, last, exp int64
			if err := rows.Scan(&k, &n, &first, &last, &exp); err != nil {
				rows.Close()
				return err
			}
			if exp > sqlcol.Nanos(now) {
				byKey[k] = oauth.Counter{N: n, First: sqlcol.Time(first), Last: sqlcol.Time(last), Expires: sqlcol.Time(exp)}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		cur := make([]oauth.Counter, len(keys))
		for i, k := range keys {
			cur[i] = byKey[k]
		}
		next := fn(slices.Clone(cur))
		for i, k := range keys {
			c := next[i]
			var err error
			if c.Expires.IsZero() || !now.Before(c.Expires) {
				_, err = t.Exec(ctx, "DELETE FROM throttle WHERE key = $1", k)
			} else if c != cur[i] {
				_, err = t.Exec(ctx, "UPDATE throttle SET n = $2, first = $3, last = $4, expires_at = $5 WHERE key = $1",
					k, c.N, sqlcol.Nanos(c.First), sqlcol.Nanos(c.Last), sqlcol.Nanos(c.Expires))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}
