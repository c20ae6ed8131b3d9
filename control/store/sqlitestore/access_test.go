package sqlitestore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/runos/vpn/control/store"
)

// The behaviour of devices, tokens and the audit log is the conformance
// suite's (control/store/storetest); this is SQLite's own migration.

// A database made by schema 1 keeps its world-file operator token: it
// becomes the account's first API token.
func TestMigration2KeepsTheWorldToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
		migrations[1],
		"INSERT INTO schema_migrations VALUES (1, 0)",
		"INSERT INTO accounts (aid, name, operator_token_hash) VALUES ('rjwrn', 'R', 'hash-of-seeded'), ('none', 'N', NULL)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s := open(t, path)
	_ = s.View(context.Background(), func(r store.Reader) error {
		k, err := r.APITokenByHash("hash-of-seeded")
		if err != nil || k.AID != "rjwrn" || k.Name != "world-file" || !k.ExpiresAt.IsZero() || !k.RevokedAt.IsZero() {
			t.Errorf("world token after migration = %+v, %v", k, err)
		}
		if ks, _ := r.APITokens("none"); len(ks) != 0 {
			t.Errorf("account without a token got %+v", ks)
		}
		return nil
	})
}
