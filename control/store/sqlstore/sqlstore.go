// Package sqlstore is control's store on SQL (database/sql), one code for
// its two databases: an embedded SQLite file (modernc.org/sqlite, one
// runos-control) and PostgreSQL (pgx's stdlib driver, several replicas over
// one database, DESIGN.md "Scale"). Every statement is written once, with ?
// placeholders, against one schema; a small dialect (dialect.go, with
// sqlite.go and postgres.go) holds what the two spell or do differently:
// placeholders, a few SQL words, error kinds, the migrations, how changes
// are serialized and told to other replicas, and leases.
//
// Every change is one transaction that first reads the version row (on
// PostgreSQL locking it, so changes of every replica are serialized as
// SQLite's single writer serializes them), then bumps the global version
// and the versions of the topics it touched; a read followed by a write
// inside a change (the next free address, a move's state) cannot race
// another. Unique keys are store.ErrExists; a database that cannot be
// reached gives errors wrapping store.ErrUnavailable.
//
// It is not the notifications' listener (control/notify): PostgreSQL gives
// it a dedicated connection (Postgres.Conn).
package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/internal/backoff"
)

// Options tune the Open functions.
type Options struct {
	Now     func() time.Time // clock for purging expired grants; nil: time.Now
	AppName string           // PostgreSQL: application_name of every connection (the replica's name)
}

// Store is a store.Store on a SQL database.
type Store struct {
	w   *sql.DB // changes; SQLite: its one writer connection
	r   *sql.DB // reads; PostgreSQL: the same pool as w
	d   dialect
	sql words
	now func() time.Time
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.StatsReader = (*Store)(nil)
)

func newStore(w, r *sql.DB, d dialect, ws words, o Options) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{w: w, r: r, d: d, sql: ws, now: o.Now}
}

// migrate applies the migrations the database lacks, each in its own
// transaction, on one connection that holds the dialect's migration lock
// (replicas starting together migrate once).
func (s *Store) migrate(ctx context.Context) error {
	c, err := s.w.Conn(ctx)
	if err != nil {
		return s.d.classify(err)
	}
	defer c.Close()
	unlock, err := s.d.lockMigrations(ctx, c)
	if err != nil {
		return fmt.Errorf("lock for migrations: %w", s.d.classify(err))
	}
	defer unlock()
	if _, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("schema_migrations: %w", s.d.classify(err))
	}
	var have int
	if err := c.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("schema_migrations: %w", s.d.classify(err))
	}
	migrations := s.d.migrations()
	last := len(migrations) - 1
	if have > last {
		return fmt.Errorf("database schema is version %d, newer than this runos-control (%d): upgrade runos-control", have, last)
	}
	for v := have + 1; v <= last; v++ {
		if err := s.migration(ctx, c, v, migrations[v]); err != nil {
			return fmt.Errorf("migration %d: %w", v, s.d.classify(err))
		}
	}
	return nil
}

func (s *Store) migration(ctx context.Context, c *sql.Conn, v int, ddl string) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"), v, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the database: leases held through this store are lost.
func (s *Store) Close() error {
	s.d.close()
	if s.r == s.w {
		return s.w.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("store: %w", s.d.classify(err))
	}
	return nil
}

// View runs fn in a read-only snapshot.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	sqlTx, err := s.r.BeginTx(ctx, s.d.readOnly())
	if err != nil {
		return fmt.Errorf("store: begin read: %w", s.d.classify(err))
	}
	defer sqlTx.Rollback()
	if err := fn(&tx{conn: s.on(ctx, sqlTx)}); err != nil {
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("store: end read: %w", s.d.classify(err))
	}
	return nil
}

// attempts is how often Update tries a change that the database refused
// before fn ran (SQLite busy, a PostgreSQL serialization failure).
const attempts = 3

// Update runs fn in one change: it first reads (on PostgreSQL, locks) the
// version row, then bumps the versions of the topics fn touched and tells
// the other replicas, all in the transaction. A change refused as
// transient before fn ran is tried again; fn itself runs at most once.
func (s *Store) Update(ctx context.Context, fn func(store.Writer) error) (store.Change, error) {
	retry := backoff.New(10*time.Millisecond, 200*time.Millisecond)
	for i := 1; ; i++ {
		ch, ran, err := s.update(ctx, fn)
		if err == nil || ran || i == attempts || !s.d.transient(err) {
			return ch, err
		}
		if retry.Wait(ctx) != nil {
			return ch, err
		}
	}
}

func (s *Store) update(ctx context.Context, fn func(store.Writer) error) (ch store.Change, ran bool, err error) {
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return ch, false, fmt.Errorf("store: begin: %w", s.d.classify(err))
	}
	defer sqlTx.Rollback()
	t := &tx{conn: s.on(ctx, sqlTx), seen: map[string]bool{}}
	var global int64
	if err := t.row("SELECT version FROM meta WHERE id = 1" + s.sql.forUpdate).Scan(&global); err != nil {
		return ch, false, fmt.Errorf("store: lock for a change: %w", s.d.classify(err))
	}
	t.global = uint64(global)
	if err := fn(t); err != nil {
		return ch, true, err
	}
	if len(t.touched) > 0 || t.bump {
		if ch, err = t.bumpVersions(); err != nil {
			return store.Change{}, true, err
		}
		if err := s.d.changed(t.conn, ch); err != nil {
			return store.Change{}, true, fmt.Errorf("store: notify: %w", s.d.classify(err))
		}
	}
	if err := sqlTx.Commit(); err != nil {
		return store.Change{}, true, fmt.Errorf("store: commit: %w", s.d.classify(err))
	}
	return ch, true, nil
}

// Grants returns the OAuth grant store on the same database.
func (s *Store) Grants() oauth.GrantStore { return grants{s} }

// Secret returns the named secret, made by whichever replica asks first.
func (s *Store) Secret(ctx context.Context, name string, size int) ([]byte, error) {
	v := make([]byte, size)
	if _, err := rand.Read(v); err != nil {
		return nil, err
	}
	c := s.on(ctx, s.w)
	if _, err := c.exec("INSERT INTO secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", name, v); err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, s.d.classify(err))
	}
	if err := c.row("SELECT value FROM secrets WHERE name = ?", name).Scan(&v); err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, s.d.classify(err))
	}
	return v, nil
}

// Lease blocks until this process holds the named lease (store.Store).
func (s *Store) Lease(ctx context.Context, name string) (store.Lease, error) {
	return s.d.lease(ctx, name, true)
}

// TryLease is Lease without waiting: store.ErrHeld when another holds it.
func (s *Store) TryLease(ctx context.Context, name string) (store.Lease, error) {
	return s.d.lease(ctx, name, false)
}
