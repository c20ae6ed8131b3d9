package sqlstore

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
	k, err := scanToken(t.row("SELECT "+tokenCols+" FROM api_tokens WHERE id = ?", id))
	return k, t.one(err, "token "+id)
}

func (t *tx) APITokenByHash(hash string) (model.APIToken, error) {
	k, err := scanToken(t.row("SELECT "+tokenCols+" FROM api_tokens WHERE token_hash = ?", hash))
	return k, t.one(err, "operator token")
}

func (t *tx) APITokens(aid string) ([]model.APIToken, error) {
	return list(t.conn, "tokens of "+aid, scanToken, "SELECT "+tokenCols+" FROM api_tokens WHERE aid = ? ORDER BY created_at, "+t.s.sql.insertOrder, aid)
}

func tokenArgs(k model.APIToken) []any {
	return []any{k.AID, k.Name, k.Hash, sqlcol.Nanos(k.CreatedAt), k.CreatedBy, sqlcol.Nanos(k.ExpiresAt), sqlcol.Nanos(k.LastUsed), sqlcol.Nanos(k.RevokedAt), k.RevokedBy}
}

func (t *tx) PutAPIToken(k model.APIToken) error {
	return t.insert("token "+k.Name, "INSERT INTO api_tokens ("+tokenCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		append([]any{k.ID}, tokenArgs(k)...)...)
}

func (t *tx) UpdateAPIToken(k model.APIToken) error {
	return t.update("token "+k.ID, `UPDATE api_tokens SET aid = ?, name = ?, token_hash = ?, created_at = ?, created_by = ?, expires_at = ?,
		last_used = ?, revoked_at = ?, revoked_by = ? WHERE id = ?`, append(tokenArgs(k), k.ID)...)
}
