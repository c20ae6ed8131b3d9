package sqlstore

import (
	"strings"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

const grantCols = "email, subject, refresh, signed_in_at"

func scanGrant(r sqlcol.Row) (model.IdentityGrant, error) {
	var g model.IdentityGrant
	var at int64
	err := r.Scan(&g.Email, &g.Subject, &g.SealedRefresh, &at)
	g.SignedInAt = sqlcol.Time(at)
	return g, err
}

func (t *tx) IdentityGrants() ([]model.IdentityGrant, error) {
	return list(t.conn, "identity provider grants", scanGrant, "SELECT "+grantCols+" FROM identity_grants ORDER BY email")
}

func (t *tx) IdentityGrant(email string) (model.IdentityGrant, error) {
	g, err := scanGrant(t.row("SELECT "+grantCols+" FROM identity_grants WHERE email = ?", strings.ToLower(email)))
	return g, t.one(err, "identity provider grant of "+email)
}

func (t *tx) PasswordUsers() (bool, error) {
	var n int
	err := t.row("SELECT COUNT(*) FROM (SELECT 1 FROM users WHERE password_hash <> '' LIMIT 1) AS p").Scan(&n)
	return n > 0, t.fail(err, "users with a password")
}

func (t *tx) PutIdentityGrant(g model.IdentityGrant) error {
	_, err := t.exec(`INSERT INTO identity_grants (email, subject, refresh, signed_in_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (email) DO UPDATE SET subject = excluded.subject, refresh = excluded.refresh, signed_in_at = excluded.signed_in_at`,
		strings.ToLower(g.Email), g.Subject, g.SealedRefresh, sqlcol.Nanos(g.SignedInAt))
	return t.fail(err, "identity provider grant of "+g.Email)
}

func (t *tx) DeleteIdentityGrant(email string) error {
	return t.update("identity provider grant of "+email, "DELETE FROM identity_grants WHERE email = ?", strings.ToLower(email))
}
