package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/storetest"
	"github.com/runos/vpn/internal/pgtest"
)

// A database of the schema just before the operator role per account
// (issue 22), whose users carry the old per-user flag, opens with this
// store on either dialect: an operator is then operator of every account
// they belong to, and a user who was no operator operates none.

func TestSQLiteOperatorFlagBecomesRoles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	db, err := sql.Open("sqlite", sqliteDSN(path, true))
	if err != nil {
		t.Fatal(err)
	}
	beforeRoles(t, db, sqliteMigrations, 6)
	db.Close()
	checkRoles(t, openTestSQLite(t, path))
}

func TestPostgresOperatorFlagBecomesRoles(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	beforeRoles(t, db, pgMigrations, 2)
	db.Close()
	s, err := OpenPostgres(context.Background(), url, Options{Now: func() time.Time { return storetest.T0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkRoles(t, s.Store)
}

// beforeRoles makes the schema of migrations 1 to last, with two accounts,
// an operator and a plain user in both, and an operator in one.
func beforeRoles(t *testing.T, db *sql.DB, migrations []string, last int) {
	t.Helper()
	qs := []string{"CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)"}
	for v := 1; v <= last; v++ {
		qs = append(qs, migrations[v], fmt.Sprintf("INSERT INTO schema_migrations (version, applied_at) VALUES (%d, 0)", v))
	}
	qs = append(qs, `
INSERT INTO accounts (aid, name) VALUES ('acme', 'Acme'), ('beta', 'Beta');
INSERT INTO users (email, password_hash, operator) VALUES ('Ops@example.com', 'h', TRUE), ('sam@example.com', 'h', FALSE), ('bea@example.com', 'h', TRUE);
INSERT INTO user_accounts (email, aid) VALUES ('Ops@example.com', 'acme'), ('Ops@example.com', 'beta'),
	('sam@example.com', 'acme'), ('sam@example.com', 'beta'), ('bea@example.com', 'beta');
`)
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("the database before roles: %v", err)
		}
	}
}

func checkRoles(t *testing.T, s *Store) {
	t.Helper()
	_ = s.View(context.Background(), func(r store.Reader) error {
		for email, want := range map[string][]string{"ops@example.com": {"acme", "beta"}, "sam@example.com": nil, "bea@example.com": {"beta"}} {
			if u, err := r.User(email); err != nil || !slices.Equal(u.Operates, want) {
				t.Errorf("%s operates %v, %v; want %v", email, u.Operates, err, want)
			}
		}
		return nil
	})
}
