package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// tx implements store.Reader and store.Writer.
type tx struct {
	ctx     context.Context
	q       querier
	touched []string
	seen    map[string]bool // nil in a View
	global  uint64          // the version when the change took the lock
	bump    bool
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

// CommitVersion: the change holds the version row's lock, so it commits as
// the version it read plus one.
func (t *tx) CommitVersion() (uint64, error) {
	if t.seen == nil {
		return 0, fmt.Errorf("store: CommitVersion outside an Update")
	}
	t.bump = true
	return t.global + 1, nil
}

// insert runs an INSERT that refuses a taken unique key with ErrExists
// without failing the statement (ON CONFLICT DO NOTHING): PostgreSQL
// aborts a transaction at its first error, and a change may go on after
// ErrExists, as on SQLite (importing a world file that exists in part).
func (t *tx) insert(what, sql string, args ...any) error {
	tag, err := t.exec(sql+" ON CONFLICT DO NOTHING", args...)
	if err != nil {
		return constraint(err, what)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return nil
}

func (t *tx) exec(sql string, args ...any) (pgconn.CommandTag, error) {
	return t.q.Exec(t.ctx, sql, args...)
}

func (t *tx) row(sql string, args ...any) pgx.Row { return t.q.QueryRow(t.ctx, sql, args...) }

// list runs a query and scans each row with scan.
func list[T any](t *tx, what string, scan func(sqlcol.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := t.q.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, classify(err))
	}
	defer rows.Close()
	out, err := sqlcol.Collect(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, classify(err))
	}
	return out, nil
}

func (t *tx) GlobalVersion() (uint64, error) {
	var v int64
	err := t.row("SELECT version FROM meta WHERE id = 1").Scan(&v)
	return uint64(v), one(err, "global version")
}

func (t *tx) TopicVersion(topics ...string) (uint64, error) {
	if len(topics) == 0 {
		return 0, nil
	}
	var v int64
	err := t.row("SELECT COALESCE(MAX(version), 0) FROM topics WHERE topic = ANY($1)", topics).Scan(&v)
	return uint64(v), one(err, "topic version")
}

func (t *tx) topicMap(what, sql string, args ...any) (map[string]uint64, error) {
	type tv struct {
		k string
		v int64
	}
	rows, err := list(t, what, func(r sqlcol.Row) (tv, error) {
		var x tv
		return x, r.Scan(&x.k, &x.v)
	}, sql, args...)
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
	return t.topicMap(fmt.Sprintf("topics since %d", v), "SELECT topic, version FROM topics WHERE version > $1", int64(v))
}

// Accounts and users.

func (t *tx) Account(aid string) (model.Account, error) {
	var a model.Account
	var hash *string
	err := t.row("SELECT aid, name, operator_token_hash FROM accounts WHERE aid = $1", aid).Scan(&a.AID, &a.Name, &hash)
	if hash != nil {
		a.OperatorTokenHash = *hash
	}
	return a, one(err, "account "+aid)
}

func (t *tx) PutAccount(a model.Account) error {
	return t.insert("account "+a.AID, "INSERT INTO accounts (aid, name, operator_token_hash) VALUES ($1, $2, $3)", a.AID, a.Name, sqlcol.Nullable(a.OperatorTokenHash))
}

func (t *tx) User(email string) (model.User, error) {
	var u model.User
	err := t.row("SELECT email, password_hash, operator FROM users WHERE lower(email) = lower($1)", email).Scan(&u.Email, &u.PasswordHash, &u.Operator)
	if err != nil {
		return u, one(err, "user "+email)
	}
	u.Accounts, err = list(t, "user "+email, sqlcol.String, "SELECT aid FROM user_accounts WHERE email = $1 ORDER BY aid", u.Email)
	return u, err
}

func (t *tx) PutUser(u model.User) error {
	if err := t.insert("user "+u.Email, "INSERT INTO users (email, password_hash, operator) VALUES ($1, $2, $3)", u.Email, u.PasswordHash, u.Operator); err != nil {
		return err
	}
	for _, aid := range u.Accounts {
		if err := t.insert("user "+u.Email+" in account "+aid, "INSERT INTO user_accounts (email, aid) VALUES ($1, $2)", u.Email, aid); err != nil {
			return err
		}
	}
	return nil
}

// Clusters.

const clusterCols = "cid, aid, name, domain_root, is_configured, user_vpn, custom_domains"

func scanCluster(row sqlcol.Row) (model.Cluster, error) {
	var c model.Cluster
	var domains string
	if err := row.Scan(&c.CID, &c.AID, &c.Name, &c.DomainRoot, &c.IsConfigured, &c.UserVPN, &domains); err != nil {
		return c, err
	}
	return c, sqlcol.FromJSON(domains, &c.CustomDomains)
}

func (t *tx) Cluster(cid string) (model.Cluster, error) {
	c, err := scanCluster(t.row("SELECT "+clusterCols+" FROM clusters WHERE cid = $1", cid))
	return c, one(err, "cluster "+cid)
}

func (t *tx) Clusters(aids []string) ([]model.Cluster, error) {
	if len(aids) == 0 {
		return nil, nil
	}
	return list(t, "clusters", scanCluster, "SELECT "+clusterCols+" FROM clusters WHERE aid = ANY($1) ORDER BY cid", aids)
}

func (t *tx) PutCluster(c model.Cluster) error {
	return t.insert("cluster "+c.CID, "INSERT INTO clusters ("+clusterCols+") VALUES ($1, $2, $3, $4, $5, $6, $7)",
		c.CID, c.AID, c.Name, c.DomainRoot, c.IsConfigured, c.UserVPN, sqlcol.JSON(sqlcol.NonNil(c.CustomDomains)))
}

func (t *tx) UpdateCluster(c model.Cluster) error {
	tag, err := t.exec("UPDATE clusters SET aid = $1, name = $2, domain_root = $3, is_configured = $4, user_vpn = $5, custom_domains = $6 WHERE cid = $7",
		c.AID, c.Name, c.DomainRoot, c.IsConfigured, c.UserVPN, sqlcol.JSON(sqlcol.NonNil(c.CustomDomains)), c.CID)
	return mustAffect(tag, err, "cluster "+c.CID)
}

// Nodes.

const nodeCols = "cid, nid, name, roles, declared_ingress, public_ip, detected_ip, published, enrollment_token_hash, last_heartbeat, gateway_key, gateway_version, gateway_started"

func scanNode(row sqlcol.Row) (model.Node, error) {
	var n model.Node
	var roles, declared, public, detected string
	var hb, started int64
	if err := row.Scan(&n.CID, &n.NID, &n.Name, &roles, &declared, &public, &detected, &n.Published,
		&n.EnrollmentTokenHash, &hb, &n.GatewayKey, &n.GatewayVersion, &started); err != nil {
		return n, err
	}
	n.GatewayStartedAt = sqlcol.Time(started)
	n.DeclaredIngress, n.PublicIP, n.DetectedIP = sqlcol.ParseAddr(declared), sqlcol.ParseAddr(public), sqlcol.ParseAddr(detected)
	n.LastHeartbeat = sqlcol.Time(hb)
	return n, sqlcol.FromJSON(roles, &n.Roles)
}

func (t *tx) Node(cid, nid string) (model.Node, error) {
	n, err := scanNode(t.row("SELECT "+nodeCols+" FROM nodes WHERE cid = $1 AND nid = $2", cid, nid))
	return n, one(err, "node "+nid+" of cluster "+cid)
}

func (t *tx) NodeByEnrollmentToken(hash string) (model.Node, error) {
	n, err := scanNode(t.row("SELECT "+nodeCols+" FROM nodes WHERE enrollment_token_hash = $1", hash))
	return n, one(err, "enrollment token")
}

func (t *tx) Nodes(cid string) ([]model.Node, error) {
	return list(t, "nodes of "+cid, scanNode, "SELECT "+nodeCols+" FROM nodes WHERE cid = $1 ORDER BY nid", cid)
}

func nodeArgs(n model.Node) []any {
	return []any{n.Name, sqlcol.JSON(sqlcol.NonNil(n.Roles)), sqlcol.Addr(n.DeclaredIngress), sqlcol.Addr(n.PublicIP), sqlcol.Addr(n.DetectedIP),
		n.Published, n.EnrollmentTokenHash, sqlcol.Nanos(n.LastHeartbeat), n.GatewayKey, n.GatewayVersion, sqlcol.Nanos(n.GatewayStartedAt)}
}

func (t *tx) PutNode(n model.Node) error {
	return t.insert("node "+n.NID+" of cluster "+n.CID, "INSERT INTO nodes ("+nodeCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
		append([]any{n.CID, n.NID}, nodeArgs(n)...)...)
}

func (t *tx) UpdateNode(n model.Node) error {
	tag, err := t.exec(`UPDATE nodes SET name = $1, roles = $2, declared_ingress = $3, public_ip = $4, detected_ip = $5,
		published = $6, enrollment_token_hash = $7, last_heartbeat = $8, gateway_key = $9, gateway_version = $10,
		gateway_started = $11 WHERE cid = $12 AND nid = $13`, append(nodeArgs(n), n.CID, n.NID)...)
	return mustAffect(tag, err, "node "+n.NID+" of cluster "+n.CID)
}

func (t *tx) DeleteNode(cid, nid string) error {
	tag, err := t.exec("DELETE FROM nodes WHERE cid = $1 AND nid = $2", cid, nid)
	return mustAffect(tag, err, "node "+nid+" of cluster "+cid)
}
