package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
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
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/runos/vpn/control/notify"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/token"
)

// PostgreSQL: changes are serialized across replicas by locking the version
// row first; each is told to the other replicas with NOTIFY in its own
// transaction (control/notify), whose listener gets a dedicated connection
// (Conn). Leases (which replica acts on timers) are session-level advisory
// locks on a connection of their own, so the database releases them the
// moment their holder's connection goes. Connection URLs carry passwords:
// nothing here puts a URL in an error or a log line unless Redact made it
// safe.

// Postgres is a Store on PostgreSQL, with what control/notify needs of it.
type Postgres struct {
	*Store
	pg *pgDialect
}

type pgDialect struct {
	cfg    *pgx.ConnConfig // for dedicated connections (leases, the listener)
	origin string          // this instance, in its notifications

	mu     sync.Mutex
	leases map[*pgLease]bool // held, released by close
}

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

// OpenPostgres connects to the database at dbURL (postgres://…), applies
// the migrations it lacks and returns the store. The URL may set the pool's
// size (pool_max_conns, default 32).
func OpenPostgres(ctx context.Context, dbURL string, o Options) (*Postgres, error) {
	pc, err := pgxpool.ParseConfig(dbURL) // pgxpool's: it knows pool_max_conns
	if err != nil {
		// pgx's parse errors can quote the URL: say what is wrong without it.
		return nil, fmt.Errorf("open store %s: not a valid PostgreSQL URL (want postgres://user:password@host:port/database)", Redact(dbURL))
	}
	cfg := pc.ConnConfig
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	if o.AppName != "" {
		cfg.RuntimeParams["application_name"] = o.AppName
	}
	if !strings.Contains(dbURL, "pool_max_conns") {
		pc.MaxConns = 32
	}
	d := &pgDialect{cfg: cfg, origin: token.ID("store"), leases: map[*pgLease]bool{}}
	db := stdlib.OpenDB(*cfg.Copy())
	db.SetMaxOpenConns(int(pc.MaxConns))
	db.SetMaxIdleConns(int(pc.MaxConns))
	db.SetConnMaxLifetime(pc.MaxConnLifetime) // pool_max_conn_lifetime, 1 h unless set
	db.SetConnMaxIdleTime(pc.MaxConnIdleTime) // pool_max_conn_idle_time, 30 min unless set
	s := newStore(db, db, d, words{greatest: "GREATEST", forUpdate: " FOR UPDATE", skipLocked: " SKIP LOCKED", insertOrder: "seq"}, o)
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", describe(cfg), err)
	}
	return &Postgres{Store: s, pg: d}, nil
}

// describe names the database without its password: user@host:port/db.
func describe(c *pgx.ConnConfig) string {
	return fmt.Sprintf("postgres %s@%s/%s", c.User, net.JoinHostPort(c.Host, fmt.Sprint(c.Port)), c.Database)
}

// Origin names this store instance in the notifications it sends.
func (p *Postgres) Origin() string { return p.pg.origin }

// Conn opens a connection of its own (not from the pool), for a LISTEN
// that must outlive any query: control/notify's listener.
func (p *Postgres) Conn(ctx context.Context) (*pgx.Conn, error) { return p.pg.conn(ctx) }

func (d *pgDialect) conn(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, d.cfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", describe(d.cfg), d.classify(err))
	}
	return c, nil
}

func (*pgDialect) rebind(q string) string { return numbered(q) }

func (*pgDialect) classify(err error) error {
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
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed") {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func (*pgDialect) unique(err error) bool { return pgCode(err) == "23505" }

// transient: serialization_failure, deadlock_detected.
func (*pgDialect) transient(err error) bool {
	c := pgCode(err)
	return c == "40001" || c == "40P01"
}

func (*pgDialect) readOnly() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
}

func (*pgDialect) lock(c conn, name string) error {
	_, err := c.exec("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", name)
	return err
}

func (d *pgDialect) changed(c conn, ch store.Change) error {
	if len(ch.Topics) == 0 {
		return nil
	}
	payload := notify.Payload(notify.Change{Origin: d.origin, Version: ch.Version, Topics: ch.Topics})
	_, err := c.exec("SELECT pg_notify(?, ?)", notify.Channel, payload)
	return err
}

func (*pgDialect) migrations() []string { return pgMigrations }

// migrationLock is the advisory lock key under which replicas migrate.
const migrationLock = "runos-control migrations"

func (*pgDialect) lockMigrations(ctx context.Context, c *sql.Conn) (func(), error) {
	if _, err := c.ExecContext(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", migrationLock); err != nil {
		return nil, err
	}
	return func() {
		_, _ = c.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", migrationLock)
	}, nil
}

func (d *pgDialect) close() {
	d.mu.Lock()
	ls := make([]*pgLease, 0, len(d.leases))
	for l := range d.leases {
		ls = append(ls, l)
	}
	d.mu.Unlock()
	for _, l := range ls {
		l.Release()
	}
}
