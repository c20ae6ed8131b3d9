package pgstore

import (
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

const tokenCols = "id, aid, name, token_hash, created_at, created_by, expires_at, last_used, revoked_at, revoked_by"

func scanToken(row sqlcol.Row) (model.APIToken, error) {
	var k model.APIToken
	var created, expires, used, revoked int64
	err := row.Scan(&k.ID, &k.AID, &k.Name, &k.Hash, &created, &k.CreatedBy, &expires, &used, &revoked, &k.RevokedBy)
	k.CreatedAt, k.ExpiresAt, k.LastUsed, k.RevokedAt = sqlcol.Time(created), sqlcol.Time(expires), sqlcol.Time(used), sqlcol.Time(revoked)
	return k, err
}

func (t *tx) APIToken(id string) (model.APIToken, error) {
	k, err := scanToken(t.row("SELECT "+tokenCols+" FROM api_tokens WHERE id = $1", id))
	return k, one(err, "token "+id)
}

func (t *tx) APITokenByHash(hash string) (model.APIToken, error) {
	k, err := scanToken(t.row("SELECT "+tokenCols+" FROM api_tokens WHERE token_hash = $1", hash))
	return k, one(err, "operator token")
}

func (t *tx) APITokens(aid string) ([]model.APIToken, error) {
	return list(t, "tokens of "+aid, scanToken, "SELECT "+tokenCols+" FROM api_tokens WHERE aid = $1 ORDER BY created_at, seq", aid)
}

func tokenArgs(k model.APIToken) []any {
	return []any{k.AID, k.Name, k.Hash, sqlcol.Nanos(k.CreatedAt), k.CreatedBy, sqlcol.Nanos(k.ExpiresAt), sqlcol.Nanos(k.LastUsed), sqlcol.Nanos(k.RevokedAt), k.RevokedBy}
}

func (t *tx) PutAPIToken(k model.APIToken) error {
	return t.insert("token "+k.Name, "INSERT INTO api_tokens ("+tokenCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
		append([]any{k.ID}, tokenArgs(k)...)...)
}

func (t *tx) UpdateAPIToken(k model.APIToken) error {
	tag, err := t.exec(`UPDATE api_tokens SET aid = $1, name = $2, token_hash = $3, created_at = $4, created_by = $5, expires_at = $6,
		last_used = $7, revoked_at = $8, revoked_by = $9 WHERE id = $10`, append(tokenArgs(k), k.ID)...)
	if err != nil {
		return constraint(err, "token "+k.ID)
	}
	return mustAffect(tag, nil, "token "+k.ID)
}
