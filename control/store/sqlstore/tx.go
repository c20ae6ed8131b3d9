package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// querier is what statements run on: a database, a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn runs statements written with ? on q, in the store's dialect.
type conn struct {
	ctx context.Context
	q   querier
	s   *Store
}

func (s *Store) on(ctx context.Context, q querier) conn { return conn{ctx: ctx, q: q, s: s} }

func (c conn) exec(query string, args ...any) (sql.Result, error) {
	return c.q.ExecContext(c.ctx, c.s.d.rebind(query), args...)
}

func (c conn) row(query string, args ...any) *sql.Row {
	return c.q.QueryRowContext(c.ctx, c.s.d.rebind(query), args...)
}

// list runs a query and scans each row with scan.
func list[T any](c conn, what string, scan func(sqlcol.Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := c.q.QueryContext(c.ctx, c.s.d.rebind(query), args...)
	if err != nil {
		return nil, c.fail(err, what)
	}
	defer rows.Close()
	out, err := sqlcol.Collect(rows, scan)
	if err != nil {
		return nil, c.fail(err, what)
	}
	return out, nil
}

// fail says what failed, err classified.
func (c conn) fail(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, c.s.d.classify(err))
}

// one maps sql.ErrNoRows to store.ErrNotFound.
func (c conn) one(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return c.fail(err, what)
}

// affected is the number of rows a statement changed.
func (c conn) affected(res sql.Result, err error, what string) (int64, error) {
	if err != nil {
		return 0, c.fail(err, what)
	}
	n, err := res.RowsAffected()
	return n, c.fail(err, what)
}

// update runs an UPDATE or DELETE of one record: store.ErrNotFound when
// there is none, store.ErrExists when it would take a unique key.
func (c conn) update(what, query string, args ...any) error {
	res, err := c.exec(query, args...)
	if err != nil && c.s.d.unique(err) {
		return fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	n, err := c.affected(res, err, what)
	if err == nil && n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

// insert runs an INSERT that refuses a taken unique key with ErrExists
// without failing the statement (ON CONFLICT DO NOTHING): PostgreSQL
// aborts a transaction at its first error, and a change may go on after
// ErrExists (importing a world file that exists in part).
func (c conn) insert(what, query string, args ...any) error {
	res, err := c.exec(query+" ON CONFLICT DO NOTHING", args...)
	n, err := c.affected(res, err, what)
	if err == nil && n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return err
}

// nanos reads one nullable number (a MIN of nanoseconds): ok=false for NULL.
func (c conn) nanos(what, query string, args ...any) (n int64, ok bool, err error) {
	var v sql.NullInt64
	err = c.row(query, args...).Scan(&v)
	return v.Int64, v.Valid, c.fail(err, what)
}

// tx implements store.Reader and store.Writer.
type tx struct {
	conn
	touched []string
	seen    map[string]bool // nil in a View
	global  uint64          // the version when the change began
	bump    bool            // CommitVersion was asked: bump even without a topic
}

var _ store.Writer = (*tx)(nil)

func (t *tx) Touch(topics ...string) {
	for _, topic := range topics {
		if !t.seen[topic] {
			t.seen[topic] = true
			t.touched = append(t.touched, topic)
		}
	}
}

// CommitVersion: no other change commits while this one runs, so it
// commits as the version it read plus one.
func (t *tx) CommitVersion() (uint64, error) {
	if t.seen == nil {
		return 0, errors.New("store: CommitVersion outside an Update")
	}
	t.bump = true
	return t.global + 1, nil
}

// topicsPerInsert bounds the rows of one INSERT of topic versions (SQLite
// takes at most 32766 parameters in a statement).
const topicsPerInsert = 500

// bumpVersions writes the change's version and its topics'.
func (t *tx) bumpVersions() (store.Change, error) {
	ch := store.Change{Version: t.global + 1, Topics: t.touched}
	if _, err := t.exec("UPDATE meta SET version = ? WHERE id = 1", int64(ch.Version)); err != nil {
		return store.Change{}, t.fail(err, "store: bump version")
	}
	for rest := t.touched; len(rest) > 0; {
		n := min(len(rest), topicsPerInsert)
		args := make([]any, 0, 2*n)
		for _, topic := range rest[:n] {
			args = append(args, topic, int64(ch.Version))
		}
		if _, err := t.exec("INSERT INTO topics (topic, version) VALUES "+tuples(n, "(?, ?)")+
			" ON CONFLICT (topic) DO UPDATE SET version = excluded.version", args...); err != nil {
			return store.Change{}, t.fail(err, "store: topics")
		}
		rest = rest[n:]
	}
	return ch, nil
}

func (t *tx) GlobalVersion() (uint64, error) {
	var v int64
	err := t.row("SELECT version FROM meta WHERE id = 1").Scan(&v)
	return uint64(v), t.one(err, "global version")
}

func (t *tx) TopicVersion(topics ...string) (uint64, error) {
	if len(topics) == 0 {
		return 0, nil
	}
	var v int64
	err := t.row("SELECT COALESCE(MAX(version), 0) FROM topics WHERE topic IN ("+marks(len(topics))+")", anyArgs(topics)...).Scan(&v)
	return uint64(v), t.one(err, "topic version")
}

func (t *tx) topicMap(what, query string, args ...any) (map[string]uint64, error) {
	type tv struct {
		k string
		v int64
	}
	rows, err := list(t.conn, what, func(r sqlcol.Row) (tv, error) {
		var x tv
		return x, r.Scan(&x.k, &x.v)
	}, query, args...)
	if err != nil {
		return nil, err
	}
	m := make(map[string]uint64, len(rows))
	for _, r := range rows {
		m[r.k] = uint64(r.v)
	}
	return m, nil
}

func (t *tx) AllTopicVersions() (map[string]uint64, error) {
	return t.topicMap("topic versions", "SELECT topic, version FROM topics")
}

func (t *tx) TopicsSince(v uint64) (map[string]uint64, error) {
	return t.topicMap(fmt.Sprintf("topics since %d", v), "SELECT topic, version FROM topics WHERE version > ?", int64(v))
}
