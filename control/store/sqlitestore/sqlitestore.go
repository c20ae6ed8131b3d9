// Package sqlitestore is control's store on an embedded SQLite file
// (modernc.org/sqlite, no cgo): WAL so that long-poll reads never wait for
// a writer, a busy timeout, foreign keys on, numbered migrations, one
// IMMEDIATE transaction per change through a single writer connection.
// synchronous=FULL: a commit is on disk before it is answered, so a crash
// of the machine cannot lose a session just issued (NORMAL in WAL mode
// may lose the last commits; docs/performance.md has what FULL costs).
// The database and its -wal and -shm files are 0600: they hold password
// hashes and every token's hash.
package sqlitestore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Store is a store.Store on one SQLite file.
type Store struct {
	w   *sql.DB // one connection: SQLite has one writer at a time anyway
	r   *sql.DB // readers, concurrent under WAL
	now func() time.Time
}

var _ store.Store = (*Store)(nil)

func dsn(path string, write bool) string {
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

// Open opens (creating if needed) the database at path and applies the
// migrations it lacks. now is the clock used to purge expired OAuth grants
// (nil: time.Now).
func Open(ctx context.Context, path string, now func() time.Time) (*Store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store %s: the path may not contain ? or #", path)
	}
	if now == nil {
		now = time.Now
	}
	if err := ownerOnly(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	w, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		w.Close()
		return nil, fmt.Errorf("open store %s: want WAL journal mode, got %q (%v)", path, mode, err)
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	n := max(4, 2*runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	return &Store{w: w, r: r, now: now}, nil
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

// SchemaVersion is the number of the last migration this binary knows.
func SchemaVersion() int { return len(migrations) - 1 }

func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	var have int
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	if have > SchemaVersion() {
		return fmt.Errorf("database schema is version %d, newer than this runos-control (%d): upgrade runos-control", have, SchemaVersion())
	}
	for v := have + 1; v <= SchemaVersion(); v++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", v, time.Now().UnixNano()); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// View runs fn in a read-only snapshot.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	sqlTx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("store: begin read: %w", err)
	}
	defer sqlTx.Rollback()
	return fn(&tx{ctx: ctx, q: sqlTx})
}

// Update runs fn in one write transaction and bumps the versions of the
// topics it touched.
func (s *Store) Update(ctx context.Context, fn func(store.Writer) error) (store.Change, error) {
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return store.Change{}, fmt.Errorf("store: begin: %w", err)
	}
	defer sqlTx.Rollback()
	t := &tx{ctx: ctx, q: sqlTx, seen: map[string]bool{}}
	if err := fn(t); err != nil {
		return store.Change{}, err
	}
	var ch store.Change
	if len(t.touched) > 0 || t.bump {
		if err := sqlTx.QueryRowContext(ctx, "UPDATE meta SET version = version + 1 WHERE id = 1 RETURNING version").Scan(&ch.Version); err != nil {
			return store.Change{}, fmt.Errorf("store: bump version: %w", err)
		}
		for _, topic := range t.touched {
			if _, err := sqlTx.ExecContext(ctx, `INSERT INTO topics (topic, version) VALUES (?, ?)
				ON CONFLICT (topic) DO UPDATE SET version = excluded.version`, topic, ch.Version); err != nil {
				return store.Change{}, fmt.Errorf("store: topic %s: %w", topic, err)
			}
		}
		ch.Topics = t.touched
	}
	if err := sqlTx.Commit(); err != nil {
		return store.Change{}, fmt.Errorf("store: commit: %w", err)
	}
	return ch, nil
}

// Grants returns the OAuth grant store on the same database.
func (s *Store) Grants() oauth.GrantStore { return grants{s} }

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// Secret returns the named secret, made on first use.
func (s *Store) Secret(ctx context.Context, name string, size int) ([]byte, error) {
	var v []byte
	_, err := s.Update(ctx, func(w store.Writer) error {
		t := w.(*tx)
		err := t.q.QueryRowContext(ctx, "SELECT value FROM secrets WHERE name = ?", name).Scan(&v)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		v = make([]byte, size)
		if _, err := rand.Read(v); err != nil {
			return err
		}
		_, err = t.exec("INSERT INTO secrets (name, value) VALUES (?, ?)", name, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	return v, nil
}

// Lease is held at once: a SQLite file has one runos-control, so there is
// no other replica to share timers with.
func (s *Store) Lease(ctx context.Context, name string) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &lease{lost: make(chan struct{})}, nil
}

// TryLease is Lease: it never waits.
func (s *Store) TryLease(ctx context.Context, name string) (store.Lease, error) {
	return s.Lease(ctx, name)
}

type lease struct {
	once sync.Once
	lost chan struct{}
}

func (l *lease) Lost() <-chan struct{} { return l.lost }
func (l *lease) Release()              { l.once.Do(func() { close(l.lost) }) }

type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// tx implements store.Reader and store.Writer.
type tx struct {
	ctx     context.Context
	q       querier
	touched []string
	seen    map[string]bool
	bump    bool // CommitVersion was asked: bump even without a topic
}

// CommitVersion is the global version plus one: this transaction holds the
// only writer connection, so nothing else commits before it.
func (t *tx) CommitVersion() (uint64, error) {
	if t.seen == nil {
		return 0, errors.New("store: CommitVersion outside an Update")
	}
	v, err := t.GlobalVersion()
	if err != nil {
		return 0, err
	}
	t.bump = true
	return v + 1, nil
}

func (t *tx) Touch(topics ...string) {
	for _, topic := range topics {
		if !t.seen[topic] {
			t.seen[topic] = true
			t.touched = append(t.touched, topic)
		}
	}
}

func (t *tx) exec(query string, args ...any) (sql.Result, error) {
	return t.q.ExecContext(t.ctx, query, args...)
}

// list runs a query and scans each row with scan.
func list[T any](t *tx, what string, scan func(sqlcol.Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := t.q.QueryContext(t.ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out, err := sqlcol.Collect(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// one maps sql.ErrNoRows to store.ErrNotFound.
func one(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}

// constraint maps a UNIQUE or PRIMARY KEY violation to store.ErrExists.
func constraint(err error, what string) error {
	if err == nil {
		return nil
	}
	if m := err.Error(); strings.Contains(m, "UNIQUE constraint failed") || strings.Contains(m, "PRIMARY KEY") {
		return fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func mustAffect(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
