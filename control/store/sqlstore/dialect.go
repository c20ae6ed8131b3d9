package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/runos/vpn/control/store"
)

// dialect is what SQLite and PostgreSQL do differently; everything else is
// written once. Statements are written with ? placeholders (rebind).
type dialect interface {
	// rebind turns a statement's ? placeholders into the database's.
	rebind(query string) string
	// classify wraps errors of a database that cannot be reached in
	// store.ErrUnavailable; others are returned as they are.
	classify(err error) error
	// unique reports a violated UNIQUE or PRIMARY KEY constraint.
	unique(err error) bool
	// transient reports a refusal worth trying again (busy, a
	// serialization failure, a deadlock).
	transient(err error) bool
	// readOnly is how a View's transaction is begun: one snapshot.
	readOnly() *sql.TxOptions
	// lock takes the named lock until tx ends: what serializes a few
	// writes outside the changes (the cap of pending device codes).
	lock(c conn, name string) error
	// changed runs in a change's transaction once its versions are
	// bumped: PostgreSQL tells the other replicas.
	changed(c conn, ch store.Change) error
	lease(ctx context.Context, name string, wait bool) (store.Lease, error)
	migrations() []string
	// lockMigrations makes replicas that start together migrate once.
	lockMigrations(ctx context.Context, c *sql.Conn) (unlock func(), err error)
	close()
}

// words are the few SQL words the dialects spell differently.
type words struct {
	greatest    string // the largest of several values: GREATEST, or SQLite's MAX
	forUpdate   string // after a SELECT: lock the rows read until the commit
	skipLocked  string // after forUpdate: pass over rows another holds
	insertOrder string // a column that orders rows as inserted
}

// numbered rewrites ? placeholders as $1, $2 … (PostgreSQL's), leaving
// any ? inside a quoted literal as it is.
func numbered(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n, quoted := 0, false
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// marks is n placeholders separated by commas: an IN (…) list.
func marks(n int) string { return tuples(n, "?") }

// tuples is n times row, separated by commas: the rows of a VALUES list.
func tuples(n int, row string) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// anyArgs is ss as arguments, for an IN (…) list.
func anyArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
