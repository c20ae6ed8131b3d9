package sqlitestore

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

func (t *tx) GlobalVersion() (uint64, error) {
	var v uint64
	return v, one(t.q.QueryRowContext(t.ctx, "SELECT version FROM meta WHERE id = 1").Scan(&v), "global version")
}

func (t *tx) TopicVersion(topics ...string) (uint64, error) {
	if len(topics) == 0 {
		return 0, nil
	}
	var v uint64
	q := "SELECT COALESCE(MAX(version), 0) FROM topics WHERE topic IN (" + placeholders(len(topics)) + ")"
	return v, one(t.q.QueryRowContext(t.ctx, q, anyArgs(topics)...).Scan(&v), "topic version")
}

func (t *tx) topicMap(what, query string, args ...any) (map[string]uint64, error) {
	type tv struct {
		k string
		v uint64
	}
	rows, err := list(t, what, func(r sqlcol.Row) (tv, error) {
		var x tv
		return x, r.Scan(&x.k, &x.v)
	}, query, args...)
	if err != nil {
		return nil, err
	}
	m := make(map[string]uint64, len(rows))
	for _, r := range rows {
		m[r.k] = r.v
	}
	return m, nil
}

func (t *tx) AllTopicVersions() (map[string]uint64, error) {
	return t.topicMap("topic versions", "SELECT topic, version FROM topics")
}

func (t *tx) TopicsSince(v uint64) (map[string]uint64, error) {
	return t.topicMap(fmt.Sprintf("topics since %d", v), "SELECT topic, version FROM topics WHERE version > ?", v)
}

// placeholders and anyArgs give an IN (…) list its ? and its values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

func anyArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Accounts and users.

func (t *tx) Account(aid string) (model.Account, error) {
	var a model.Account
	var hash sql.NullString
	err := t.q.QueryRowContext(t.ctx, "SELECT aid, name, operator_token_hash FROM accounts WHERE aid = ?", aid).
		Scan(&a.AID, &a.Name, &hash)
	a.OperatorTokenHash = hash.String
	return a, one(err, "account "+aid)
}

func (t *tx) PutAccount(a model.Account) error {
	_, err := t.exec("INSERT INTO accounts (aid, name, operator_token_hash) VALUES (?, ?, ?)",
		a.AID, a.Name, sqlcol.Nullable(a.OperatorTokenHash))
	return constraint(err, "account "+a.AID)
}

func (t *tx) User(email string) (model.User, error) {
	var u model.User
	var op int
	err := t.q.QueryRowContext(t.ctx, "SELECT email, password_hash, operator FROM users WHERE email = ? COLLATE NOCASE", email).
		Scan(&u.Email, &u.PasswordHash, &op)
	if err != nil {
		return u, one(err, "user "+email)
	}
	u.Operator = op != 0
	u.Accounts, err = list(t, "user "+email, sqlcol.String, "SELECT aid FROM user_accounts WHERE email = ? ORDER BY aid", u.Email)
	return u, err
}

func (t *tx) PutUser(u model.User) error {
	if _, err := t.exec("INSERT INTO users (email, password_hash, operator) VALUES (?, ?, ?)",
		u.Email, u.PasswordHash, b2i(u.Operator)); err != nil {
		return constraint(err, "user "+u.Email)
	}
	for _, aid := range u.Accounts {
		if _, err := t.exec("INSERT INTO user_accounts (email, aid) VALUES (?, ?)", u.Email, aid); err != nil {
			return constraint(err, "user "+u.Email+" in account "+aid)
		}
	}
	return nil
}

// Clusters.

const clusterCols = "cid, aid, name, domain_root, is_configured, user_vpn, custom_domains"

func scanCluster(row sqlcol.Row) (model.Cluster, error) {
	var c model.Cluster
	var conf int
	var domains string
	if err := row.Scan(&c.CID, &c.AID, &c.Name, &c.DomainRoot, &conf, &c.UserVPN, &domains); err != nil {
		return c, err
	}
	c.IsConfigured = conf != 0
	return c, sqlcol.FromJSON(domains, &c.CustomDomains)
}

func (t *tx) Cluster(cid string) (model.Cluster, error) {
	c, err := scanCluster(t.q.QueryRowContext(t.ctx, "SELECT "+clusterCols+" FROM clusters WHERE cid = ?", cid))
	return c, one(err, "cluster "+cid)
}

func (t *tx) Clusters(aids []string) ([]model.Cluster, error) {
	if len(aids) == 0 {
		return nil, nil
	}
	return list(t, "clusters", scanCluster, "SELECT "+clusterCols+" FROM clusters WHERE aid IN ("+placeholders(len(aids))+") ORDER BY cid", anyArgs(aids)...)
}

func (t *tx) PutCluster(c model.Cluster) error {
	_, err := t.exec("INSERT INTO clusters ("+clusterCols+") VALUES (?, ?, ?, ?, ?, ?, ?)",
		c.CID, c.AID, c.Name, c.DomainRoot, b2i(c.IsConfigured), c.UserVPN, sqlcol.JSON(sqlcol.NonNil(c.CustomDomains)))
	return constraint(err, "cluster "+c.CID)
}

func (t *tx) UpdateCluster(c model.Cluster) error {
	res, err := t.exec("UPDATE clusters SET aid = ?, name = ?, domain_root = ?, is_configured = ?, user_vpn = ?, custom_domains = ? WHERE cid = ?",
		c.AID, c.Name, c.DomainRoot, b2i(c.IsConfigured), c.UserVPN, sqlcol.JSON(sqlcol.NonNil(c.CustomDomains)), c.CID)
	return mustAffect(res, err, "cluster "+c.CID)
}

// Nodes.

const nodeCols = "cid, nid, name, roles, declared_ingress, public_ip, detected_ip, published, enrollment_token_hash, last_heartbeat, gateway_key, gateway_version, gateway_started"

func scanNode(row sqlcol.Row) (model.Node, error) {
	var n model.Node
	var roles, declared, public, detected string
	var published int
	var hb, started int64
	if err := row.Scan(&n.CID, &n.NID, &n.Name, &roles, &declared, &public, &detected, &published,
		&n.EnrollmentTokenHash, &hb, &n.GatewayKey, &n.GatewayVersion, &started); err != nil {
		return n, err
	}
	n.GatewayStartedAt = sqlcol.Time(started)
	n.DeclaredIngress, n.PublicIP, n.DetectedIP = sqlcol.ParseAddr(declared), sqlcol.ParseAddr(public), sqlcol.ParseAddr(detected)
	n.Published = published != 0
	n.LastHeartbeat = sqlcol.Time(hb)
	return n, sqlcol.FromJSON(roles, &n.Roles)
}

func (t *tx) Node(cid, nid string) (model.Node, error) {
	n, err := scanNode(t.q.QueryRowContext(t.ctx, "SELECT "+nodeCols+" FROM nodes WHERE cid = ? AND nid = ?", cid, nid))
	return n, one(err, "node "+nid+" of cluster "+cid)
}

func (t *tx) NodeByEnrollmentToken(hash string) (model.Node, error) {
	n, err := scanNode(t.q.QueryRowContext(t.ctx, "SELECT "+nodeCols+" FROM nodes WHERE enrollment_token_hash = ?", hash))
	return n, one(err, "enrollment token")
}

func (t *tx) Nodes(cid string) ([]model.Node, error) {
	return list(t, "nodes of "+cid, scanNode, "SELECT "+nodeCols+" FROM nodes WHERE cid = ? ORDER BY nid", cid)
}

func nodeArgs(n model.Node) []any {
	return []any{n.Name, sqlcol.JSON(sqlcol.NonNil(n.Roles)), sqlcol.Addr(n.DeclaredIngress), sqlcol.Addr(n.PublicIP), sqlcol.Addr(n.DetectedIP),
		b2i(n.Published), n.EnrollmentTokenHash, sqlcol.Nanos(n.LastHeartbeat), n.GatewayKey, n.GatewayVersion, sqlcol.Nanos(n.GatewayStartedAt)}
}

func (t *tx) PutNode(n model.Node) error {
	_, err := t.exec("INSERT INTO nodes ("+nodeCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		append([]any{n.CID, n.NID}, nodeArgs(n)...)...)
	return constraint(err, "node "+n.NID+" of cluster "+n.CID)
}

func (t *tx) UpdateNode(n model.Node) error {
	res, err := t.exec(`UPDATE nodes SET name = ?, roles = ?, declared_ingress = ?, public_ip = ?, detected_ip = ?,
		published = ?, enrollment_token_hash = ?, last_heartbeat = ?, gateway_key = ?, gateway_version = ?, gateway_started = ?
		WHERE cid = ? AND nid = ?`, append(nodeArgs(n), n.CID, n.NID)...)
	return mustAffect(res, err, "node "+n.NID+" of cluster "+n.CID)
}

func (t *tx) DeleteNode(cid, nid string) error {
	res, err := t.exec("DELETE FROM nodes WHERE cid = ? AND nid = ?", cid, nid)
	return mustAffect(res, err, "node "+nid+" of cluster "+cid)
}

var _ store.Writer = (*tx)(nil)
