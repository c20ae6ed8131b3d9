package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/runos/vpn/control/store"
)

// SQLite: WAL so that long-poll reads never wait for a writer, a busy
// timeout, foreign keys on, one IMMEDIATE transaction per change through a
// single writer connection (which is what serializes changes).
// synchronous=FULL: a commit is on disk before it is answered, so a crash
// of the machine cannot lose a session just issued (NORMAL in WAL mode may
// lose the last commits; docs/performance.md has what FULL costs). The
// database and its -wal and -shm files are 0600: they hold password hashes
// and every token's hash.

type sqliteDialect struct{}

func sqliteDSN(path string, write bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	if write {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// OpenSQLite opens (creating if needed) the database at path and applies
// the migrations it lacks.
func OpenSQLite(ctx context.Context, path string, o Options) (*Store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store %s: the path may not contain ? or #", path)
	}
	s, err := openSQLite(ctx, path, o)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

func openSQLite(ctx context.Context, path string, o Options) (*Store, error) {
	if err := ownerOnly(path); err != nil {
		return nil, err
	}
	w, err := sql.Open("sqlite", sqliteDSN(path, true))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1) // SQLite has one writer at a time anyway
	w.SetConnMaxIdleTime(0)
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		w.Close()
		return nil, fmt.Errorf("want WAL journal mode, got %q (%v)", mode, err)
	}
	r, err := sql.Open("sqlite", sqliteDSN(path, false))
	if err != nil {
		w.Close()
		return nil, err
	}
	n := max(4, 2*runtime.GOMAXPROCS(0)) // readers, concurrent under WAL
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	s := newStore(w, r, sqliteDialect{}, words{greatest: "MAX", insertOrder: "rowid"}, o)
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// ownerOnly creates the database file 0600 if it is missing and makes it
// and its companions 0600 if they are looser (an older control, a copy):
// SQLite gives the -wal and -shm files it creates the database's mode.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

func (sqliteDialect) rebind(q string) string   { return q }
func (sqliteDialect) classify(err error) error { return err }

func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

func (sqliteDialect) unique(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func (sqliteDialect) transient(err error) bool {
	c := sqliteCode(err) & 0xff // the primary code of an extended one
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
}

func (sqliteDialect) readOnly() *sql.TxOptions { return &sql.TxOptions{ReadOnly: true} }

// lock: a write transaction already holds SQLite's one write lock.
func (sqliteDialect) lock(conn, string) error { return nil }

// changed: a SQLite file has no other replica to tell.
func (sqliteDialect) changed(conn, store.Change) error { return nil }

func (sqliteDialect) migrations() []string { return sqliteMigrations }

// lockMigrations: the migrations run on the one writer connection.
func (sqliteDialect) lockMigrations(context.Context, *sql.Conn) (func(), error) {
	return func() {}, nil
}

func (sqliteDialect) close() {}

// lease is held at once: a SQLite file has one runos-control, so there is
// no other replica to share timers with.
func (sqliteDialect) lease(ctx context.Context, name string, wait bool) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &soleLease{lost: make(chan struct{})}, nil
}

type soleLease struct {
	once sync.Once
	lost chan struct{}
}

func (l *soleLease) Lost() <-chan struct{} { return l.lost }
func (l *soleLease) Release()              { l.once.Do(func() { close(l.lost) }) }
