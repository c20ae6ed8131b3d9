// Package pgstore is control's store on PostgreSQL (github.com/jackc/pgx/v5
// and its pool), for several runos-control replicas over one database
// (DESIGN.md "Scale"). It keeps sqlitestore's semantics, checked by the one
// suite both pass (control/store/storetest): every change is one
// transaction that bumps the global version and the versions of the topics
// it touched; changes are serialized across replicas by locking the
// version row first, as SQLite's single writer serializes them, so a read
// followed by a write inside a change (the next free address, a move's
// state) cannot race another replica; unique keys are ErrExists.
//
// Each change is also told to the other replicas with NOTIFY in its own
// transaction (control/notify), and the store gives the listener its
// dedicated connection. Leases (which replica acts on timers) are
// session-level advisory locks on a connection of their own, so the
// database releases them the moment their holder's connection goes.
//
// A database that cannot be reached gives errors wrapping
// store.ErrUnavailable. Connection URLs carry passwords: nothing here puts
// a URL in an error or a log line unless Redact made it safe.
package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runos/vpn/control/notify"
	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/store"
)

// Options tune Open.
type Options struct {
	Now     func() time.Time // clock for purging expired grants; nil: time.Now
	AppName string           // application_name of every connection (the replica's name), shown in pg_stat_activity
}

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	pool   *pgxpool.Pool
	cfg    *pgx.ConnConfig // for dedicated connections (leases, the listener)
	now    func() time.Time
	origin string // this instance, in its notifications

	mu     sync.Mutex
	leases map[*lease]bool // held, released by Close
}

var _ store.Store = (*Store)(nil)

// Redact returns the URL with its password replaced, for logs and errors.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Open connects to the database at dbURL (postgres://…), applies the
// migrations it lacks and returns the store.
func Open(ctx context.Context, dbURL string, o Options) (*Store, error) {
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		// pgx's parse errors can quote the URL: say what is wrong without it.
		return nil, fmt.Errorf("open store %s: not a valid PostgreSQL URL (want postgres://user:password@host:port/database)", Redact(dbURL))
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if o.AppName != "" {
		pc.ConnConfig.RuntimeParams["application_name"] = o.AppName
	}
	if !strings.Contains(dbURL, "pool_max_conns") {
		pc.MaxConns = 32
	}
	pc.HealthCheckPeriod = 5 * time.Second
	if o.Now == nil {
		o.Now = time.Now
	}
	where := describe(pc.ConnConfig)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", where, classify(err))
	}
	s := &Store{pool: pool, cfg: pc.ConnConfig, now: o.Now, origin: randomID(), leases: map[*lease]bool{}}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store %s: %w", where, err)
	}
	return s, nil
}

// describe names the database without its password: user@host:port/db.
func describe(c *pgx.ConnConfig) string {
	return fmt.Sprintf("postgres %s@%s/%s", c.User, net.JoinHostPort(c.Host, fmt.Sprint(c.Port)), c.Database)
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// Origin names this store instance in the notifications it sends.
func (s *Store) Origin() string { return s.origin }

// SchemaVersion is the number of the last migration this binary knows.
func SchemaVersion() int { return len(migrations) - 1 }

// migrationLock is the advisory lock key under which replicas migrate.
const migrationLock = "runos-control migrations"

func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", migrationLock); err != nil {
		return fmt.Errorf("lock for migrations: %w", classify(err))
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", migrationLock)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("schema_migrations: %w", classify(err))
	}
	var have int
	if err := conn.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("schema_migrations: %w", classify(err))
	}
	if have > SchemaVersion() {
		return fmt.Errorf("database schema is version %d, newer than this runos-control (%d): upgrade runos-control", have, SchemaVersion())
	}
	for v := have + 1; v <= SchemaVersion(); v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", v, time.Now().UnixNano())
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %d: %w", v, classify(err))
		}
	}
	return nil
}

// Close closes every connection: leases held through this store are lost.
func (s *Store) Close() error {
	s.mu.Lock()
	ls := make([]*lease, 0, len(s.leases))
	for l := range s.leases {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.Release()
	}
	s.pool.Close()
	return nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("store: %w", classify(err))
	}
	return nil
}

// View runs fn in a read-only snapshot.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	t, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("store: begin read: %w", classify(err))
	}
	defer t.Rollback(context.WithoutCancel(ctx))
	if err := fn(&tx{ctx: ctx, q: t}); err != nil {
		return err
	}
	if err := t.Commit(ctx); err != nil {
		return fmt.Errorf("store: end read: %w", classify(err))
	}
	return nil
}

// Update runs fn in one change: it first locks the version row, so that
// changes of every replica are serialized, then bumps the versions of the
// topics fn touched and tells the other replicas, all in the transaction.
func (s *Store) Update(ctx context.Context, fn func(store.Writer) error) (store.Change, error) {
	t, err := s.pool.Begin(ctx)
	if err != nil {
		return store.Change{}, fmt.Errorf("store: begin: %w", classify(err))
	}
	defer t.Rollback(context.WithoutCancel(ctx))
	w := &tx{ctx: ctx, q: t, seen: map[string]bool{}}
	if err := t.QueryRow(ctx, "SELECT version FROM meta WHERE id = 1 FOR UPDATE").Scan(&w.global); err != nil {
		return store.Change{}, fmt.Errorf("store: lock for a change: %w", classify(err))
	}
	if err := fn(w); err != nil {
		return store.Change{}, err
	}
	var ch store.Change
	if len(w.touched) > 0 || w.bump {
		ch.Version = w.global + 1
		if _, err := t.Exec(ctx, "UPDATE meta SET version = $1 WHERE id = 1", ch.Version); err != nil {
			return store.Change{}, fmt.Errorf("store: bump version: %w", classify(err))
		}
		if len(w.touched) > 0 {
			if _, err := t.Exec(ctx, `INSERT INTO topics (topic, version) SELECT unnest($1::text[]), $2
				ON CONFLICT (topic) DO UPDATE SET version = EXCLUDED.version`, w.touched, ch.Version); err != nil {
				return store.Change{}, fmt.Errorf("store: topics: %w", classify(err))
			}
			ch.Topics = w.touched
			payload := notify.Payload(notify.Change{Origin: s.origin, Version: ch.Version, Topics: ch.Topics})
			if _, err := t.Exec(ctx, "SELECT pg_notify($1, $2)", notify.Channel, payload); err != nil {
				return store.Change{}, fmt.Errorf("store: notify: %w", classify(err))
			}
		}
	}
	if err := t.Commit(ctx); err != nil {
		return store.Change{}, fmt.Errorf("store: commit: %w", classify(err))
	}
	return ch, nil
}

// Grants returns the OAuth grant store on the same database.
func (s *Store) Grants() oauth.GrantStore { return grants{s} }

// Secret returns the named secret, made by whichever replica asks first.
func (s *Store) Secret(ctx context.Context, name string, size int) ([]byte, error) {
	v := make([]byte, size)
	if _, err := rand.Read(v); err != nil {
		return nil, err
	}
	if _, err := s.pool.Exec(ctx, "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", name, v); err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, classify(err))
	}
	if err := s.pool.QueryRow(ctx, "SELECT value FROM secrets WHERE name = $1", name).Scan(&v); err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, classify(err))
	}
	return v, nil
}

// Conn opens a connection of its own (not from the pool), for a LISTEN
// that must outlive any query: control/notify's listener.
func (s *Store) Conn(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, s.cfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", describe(s.cfg), classify(err))
	}
	return c, nil
}

// Lease takes a session-level advisory lock named name on a connection of
// its own, waiting while another replica holds it. The lock is the
// database's: it goes with the holder's connection, at once when its
// process dies. The holder checks its connection every leaseCheck and
// counts the lease lost when it fails.
func (s *Store) Lease(ctx context.Context, name string) (store.Lease, error) {
	return s.lease(ctx, name, true)
}

// TryLease is Lease without waiting (pg_try_advisory_lock).
func (s *Store) TryLease(ctx context.Context, name string) (store.Lease, error) {
	return s.lease(ctx, name, false)
}

func (s *Store) lease(ctx context.Context, name string, wait bool) (store.Lease, error) {
	c, err := s.Conn(ctx)
	if err != nil {
		return nil, err
	}
	fn := "pg_try_advisory_lock"
	if wait {
		fn = "pg_advisory_lock"
	}
	got := true
	err = c.QueryRow(ctx, "SELECT "+fn+"(hashtextextended($1, 0))::text <> 'false'", "runos-lease:"+name).Scan(&got)
	if err != nil || !got {
		c.Close(context.Background())
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return nil, fmt.Errorf("lease %s: %w", name, classify(err))
		}
		return nil, store.ErrHeld
	}
	l := &lease{s: s, c: c, lost: make(chan struct{}), stop: make(chan struct{})}
	s.mu.Lock()
	s.leases[l] = true
	s.mu.Unlock()
	go l.hold()
	return l, nil
}

// leaseCheck is how often a holder checks that its lock's connection is
// alive: after a network fault the database frees the lock when it sees
// the connection die; the holder must stop acting by then.
const leaseCheck = time.Second

type lease struct {
	s    *Store
	c    *pgx.Conn
	lost chan struct{}
	stop chan struct{}
	once sync.Once
}

func (l *lease) hold() {
	t := time.NewTicker(leaseCheck)
	defer t.Stop()
	defer func() {
		l.c.Close(context.Background())
		l.s.mu.Lock()
		delete(l.s.leases, l)
		l.s.mu.Unlock()
		close(l.lost)
	}()
	for {
		select {
		case <-l.stop:
			// Unlock before closing: the server frees a closed
			// connection's locks only once its backend has processed
			// the close, after Release has returned, so another
			// replica's TryLease right after could still find it held.
			ctx, cancel := context.WithTimeout(context.Background(), leaseCheck)
			_, _ = l.c.Exec(ctx, "SELECT pg_advisory_unlock_all()")
			cancel()
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), leaseCheck)
			err := l.c.Ping(ctx)
			cancel()
			if err != nil {
				return
			}
		}
	}
}

func (l *lease) Lost() <-chan struct{} { return l.lost }

func (l *lease) Release() {
	l.once.Do(func() { close(l.stop) })
	<-l.lost
}

// classify wraps errors of a database that cannot be reached in
// store.ErrUnavailable; others are returned as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutting down, crash, cannot connect now
			pe.Code == "53300": // too many connections
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed") {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// one maps pgx.ErrNoRows to store.ErrNotFound.
func one(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	default:
		return fmt.Errorf("%s: %w", what, classify(err))
	}
}

// constraint maps a unique violation to store.ErrExists.
func constraint(err error, what string) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return fmt.Errorf("%s: %w", what, classify(err))
}

func mustAffect(tag pgconn.CommandTag, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}
