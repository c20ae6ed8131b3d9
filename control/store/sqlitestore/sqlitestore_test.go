package sqlitestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/storetest"
)

// The store's behaviour is control/store/storetest's, on a SQLite file;
// this file keeps what is SQLite's own: the migrations' bookkeeping and the
// file's settings.

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, func() time.Time { return storetest.T0.Add(-4 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(*testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "control.db")
		return func(t *testing.T) store.Store { return open(t, path) }
	}, false)
}

func TestMigrationsFromEmptyAndRerun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	s := open(t, path)
	var n int
	if err := s.w.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil || n != SchemaVersion() {
		t.Fatalf("schema_migrations rows = %d (%v), want %d", n, err, SchemaVersion())
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
	s2 := open(t, path)
	if err := s2.w.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil || n != SchemaVersion() {
		t.Fatalf("after reopen: %d rows (%v)", n, err)
	}
	if err := s2.w.QueryRow("SELECT COUNT(*) FROM secrets").Scan(&n); err != nil || n != 1 {
		t.Fatalf("secrets after reopen: %d (%v)", n, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	s := open(t, path)
	if _, err := s.w.Exec("INSERT INTO schema_migrations VALUES (?, 0)", SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(context.Background(), path, nil); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
}

func TestPathWithQueryRefused(t *testing.T) {
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "c.db?mode=ro"), nil); err == nil {
		t.Fatal("a path with ? accepted")
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "c.db")); err == nil {
		t.Fatal("file created")
	}
}
