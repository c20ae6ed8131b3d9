package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/store"
)

// grants is the oauth.GrantStore on the same database, so that several
// replicas share pending codes. Entries past their expiry (plus a minute's
// grace, so the OAuth server can still say "expired") are purged on write.
type grants struct{ s *Store }

const grantGrace = time.Minute

func (g grants) write(ctx context.Context, fn func(t *tx) error) error {
	_, err := g.s.Update(ctx, func(w store.Writer) error {
		t := w.(*tx)
		cut := ts(g.s.now().Add(-grantGrace))
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
			VALUES (?, ?, ?, ?, ?, ?)`, c.CodeHash, c.ClientID, c.RedirectURI, c.CodeChallenge, c.User, ts(c.ExpiresAt))
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
		c.ExpiresAt = tm(exp)
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

func scanDeviceCode(row interface{ Scan(...any) error }) (oauth.DeviceCode, error) {
	var d oauth.DeviceCode
	var approved, denied int
	var exp, interval, last int64
	err := row.Scan(&d.DeviceCodeHash, &d.UserCode, &d.ClientID, &d.User, &approved, &denied, &exp, &interval, &last)
	d.Approved, d.Denied = approved != 0, denied != 0
	d.ExpiresAt, d.Interval, d.LastPoll = tm(exp), time.Duration(interval), tm(last)
	return d, err
}

func (g grants) PutDeviceCode(ctx context.Context, d oauth.DeviceCode) error {
	return g.write(ctx, func(t *tx) error {
		_, err := t.exec("INSERT INTO oauth_device_codes ("+deviceCodeCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			d.DeviceCodeHash, d.UserCode, d.ClientID, d.User, b2i(d.Approved), b2i(d.Denied), ts(d.ExpiresAt), int64(d.Interval), ts(d.LastPoll))
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

func (g grants) UpdateDeviceCode(ctx context.Context, d oauth.DeviceCode) error {
	err := g.write(ctx, func(t *tx) error {
		res, err := t.exec(`UPDATE oauth_device_codes SET user_code = ?, client_id = ?, user = ?, approved = ?, denied = ?,
			expires_at = ?, interval_ns = ?, last_poll = ? WHERE device_code_hash = ?`,
			d.UserCode, d.ClientID, d.User, b2i(d.Approved), b2i(d.Denied), ts(d.ExpiresAt), int64(d.Interval), ts(d.LastPoll), d.DeviceCodeHash)
		return mustAffect(res, err, "device code")
	})
	if isNotFound(err) {
		return oauth.ErrNotFound
	}
	return err
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
