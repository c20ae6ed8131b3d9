package sqlstore

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/storetest"
)

// The store's behaviour is control/store/storetest's, run here on a SQLite
// file and in postgres_test.go on PostgreSQL; these files keep what is a
// dialect's own: migrations' bookkeeping, the file's settings, a server's
// faults.

func openTestSQLite(t *testing.T, path string) *Store {
	t.Helper()
	s, err := OpenSQLite(context.Background(), path, Options{Now: func() time.Time { return storetest.T0.Add(-4 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(*testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "control.db")
		return func(t *testing.T) store.Store { return openTestSQLite(t, path) }
	}, false)
}

func TestSQLiteMigrationsFromEmptyAndRerun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	s := openTestSQLite(t, path)
	var n int
	if err := s.w.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil || n != len(sqliteMigrations)-1 {
		t.Fatalf("schema_migrations rows = %d (%v), want %d", n, err, len(sqliteMigrations)-1)
	}
	var fk int
	if err := s.r.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d (%v)", fk, err)
	}
	if _, err := s.Secret(context.Background(), "csrf", 32); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Re-opening applies nothing twice and keeps the data.
	s2 := openTestSQLite(t, path)
	if err := s2.w.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil || n != len(sqliteMigrations)-1 {
		t.Fatalf("after reopen: %d rows (%v)", n, err)
	}
	if err := s2.w.QueryRow("SELECT COUNT(*) FROM secrets").Scan(&n); err != nil || n != 1 {
		t.Fatalf("secrets after reopen: %d (%v)", n, err)
	}
}

func TestSQLiteNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	s := openTestSQLite(t, path)
	if _, err := s.w.Exec("INSERT INTO schema_migrations VALUES (?, 0)", len(sqliteMigrations)-1+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenSQLite(context.Background(), path, Options{}); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
}

func TestSQLitePathWithQueryRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenSQLite(context.Background(), filepath.Join(dir, "c.db?mode=ro"), Options{}); err == nil {
		t.Fatal("a path with ? accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "c.db")); err == nil {
		t.Fatal("file created")
	}
}

// A database made by schema 1 keeps its world-file operator token: it
// becomes the account's first API token.
func TestSQLiteMigration2KeepsTheWorldToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", sqliteDSN(path, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
		sqliteMigrations[1],
		"INSERT INTO schema_migrations VALUES (1, 0)",
		"INSERT INTO accounts (aid, name, operator_token_hash) VALUES ('rjwrn', 'R', 'hash-of-seeded'), ('none', 'N', NULL)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s := openTestSQLite(t, path)
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

// SQLite's refusals are told apart: a taken key is unique (ErrExists), a
// write lock held by another connection is transient (tried again).
func TestSQLiteErrorKinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	s := openTestSQLite(t, path)
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.Exec("INSERT INTO secrets (name, value) VALUES ('a', x'00'), ('a', x'01')")
	if d := (sqliteDialect{}); err == nil || !d.unique(err) || d.transient(err) {
		t.Errorf("a taken key: %v, unique %v", err, d.unique(err))
	}
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := s.Update(context.Background(), func(store.Writer) error {
			close(held)
			<-release
			return nil
		})
		done <- err
	}()
	<-held
	_, err = other.Begin()
	if d := (sqliteDialect{}); err == nil || !d.transient(err) || d.unique(err) {
		t.Errorf("a write while a change holds the lock: %v, transient %v", err, d.transient(err))
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
