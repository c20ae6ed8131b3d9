package sqlstore

import (
	"database/sql"
	"fmt"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// Accounts and users.

func (t *tx) Account(aid string) (model.Account, error) {
	var a model.Account
	var hash sql.NullString
	err := t.row("SELECT aid, name, operator_token_hash FROM accounts WHERE aid = ?", aid).Scan(&a.AID, &a.Name, &hash)
	a.OperatorTokenHash = hash.String
	return a, t.one(err, "account "+aid)
}

func (t *tx) PutAccount(a model.Account) error {
	return t.insert("account "+a.AID, "INSERT INTO accounts (aid, name, operator_token_hash) VALUES (?, ?, ?)", a.AID, a.Name, sqlcol.Nullable(a.OperatorTokenHash))
}

func (t *tx) User(email string) (model.User, error) {
	var u model.User
	err := t.row("SELECT email, password_hash FROM users WHERE lower(email) = lower(?)", email).Scan(&u.Email, &u.PasswordHash)
	if err != nil {
		return u, t.one(err, "user "+email)
	}
	type role struct {
		aid      string
		operator bool
	}
	roles, err := list(t.conn, "accounts of user "+email, func(r sqlcol.Row) (role, error) {
		var x role
		return x, r.Scan(&x.aid, &x.operator)
	}, "SELECT aid, operator FROM user_accounts WHERE email = ? ORDER BY aid", u.Email)
	for _, x := range roles {
		addRole(&u, x.aid, x.operator)
	}
	return u, err
}

// addRole adds an account of the user's, read in aid order, and their
// role there.
func addRole(u *model.User, aid string, operator bool) {
	u.Accounts = append(u.Accounts, aid)
	if operator {
		u.Operates = append(u.Operates, aid)
	}
}

func (t *tx) PutUser(u model.User) error {
	for _, aid := range u.Operates {
		if !u.InAccount(aid) {
			return fmt.Errorf("user %s: operator of account %s, which the user is not in", u.Email, aid)
		}
	}
	if err := t.insert("user "+u.Email, "INSERT INTO users (email, password_hash) VALUES (?, ?)", u.Email, u.PasswordHash); err != nil {
		return err
	}
	for _, aid := range u.Accounts {
		if err := t.insert("user "+u.Email+" in account "+aid, "INSERT INTO user_accounts (email, aid, operator) VALUES (?, ?, ?)",
			u.Email, aid, u.OperatorOf(aid)); err != nil {
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
	c, err := scanCluster(t.row("SELECT "+clusterCols+" FROM clusters WHERE cid = ?", cid))
	return c, t.one(err, "cluster "+cid)
}

func (t *tx) Clusters(aids []string) ([]model.Cluster, error) {
	if len(aids) == 0 {
		return nil, nil
	}
	return list(t.conn, "clusters", scanCluster, "SELECT "+clusterCols+" FROM clusters WHERE aid IN ("+marks(len(aids))+") ORDER BY cid", anyArgs(aids)...)
}

func (t *tx) PutCluster(c model.Cluster) error {
	return t.insert("cluster "+c.CID, "INSERT INTO clusters ("+clusterCols+") VALUES (?, ?, ?, ?, ?, ?, ?)",
		c.CID, c.AID, c.Name, c.DomainRoot, c.IsConfigured, c.UserVPN, sqlcol.JSON(sqlcol.NonNil(c.CustomDomains)))
}

func (t *tx) UpdateCluster(c model.Cluster) error {
	return t.update("cluster "+c.CID, "UPDATE clusters SET aid = ?, name = ?, domain_root = ?, is_configured = ?, user_vpn = ?, custom_domains = ? WHERE cid = ?",
		c.AID, c.Name, c.DomainRoot, c.IsConfigured, c.UserVPN, sqlcol.JSON(sqlcol.NonNil(c.CustomDomains)), c.CID)
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
	n, err := scanNode(t.row("SELECT "+nodeCols+" FROM nodes WHERE cid = ? AND nid = ?", cid, nid))
	return n, t.one(err, "node "+nid+" of cluster "+cid)
}

func (t *tx) NodeByEnrollmentToken(hash string) (model.Node, error) {
	n, err := scanNode(t.row("SELECT "+nodeCols+" FROM nodes WHERE enrollment_token_hash = ?", hash))
	return n, t.one(err, "enrollment token")
}

func (t *tx) Nodes(cid string) ([]model.Node, error) {
	return list(t.conn, "nodes of "+cid, scanNode, "SELECT "+nodeCols+" FROM nodes WHERE cid = ? ORDER BY nid", cid)
}

func nodeArgs(n model.Node) []any {
	return []any{n.Name, sqlcol.JSON(sqlcol.NonNil(n.Roles)), sqlcol.Addr(n.DeclaredIngress), sqlcol.Addr(n.PublicIP), sqlcol.Addr(n.DetectedIP),
		n.Published, n.EnrollmentTokenHash, sqlcol.Nanos(n.LastHeartbeat), n.GatewayKey, n.GatewayVersion, sqlcol.Nanos(n.GatewayStartedAt)}
}

func (t *tx) PutNode(n model.Node) error {
	return t.insert("node "+n.NID+" of cluster "+n.CID, "INSERT INTO nodes ("+nodeCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		append([]any{n.CID, n.NID}, nodeArgs(n)...)...)
}

func (t *tx) UpdateNode(n model.Node) error {
	return t.update("node "+n.NID+" of cluster "+n.CID, `UPDATE nodes SET name = ?, roles = ?, declared_ingress = ?, public_ip = ?, detected_ip = ?,
		published = ?, enrollment_token_hash = ?, last_heartbeat = ?, gateway_key = ?, gateway_version = ?,
		gateway_started = ? WHERE cid = ? AND nid = ?`, append(nodeArgs(n), n.CID, n.NID)...)
}

func (t *tx) DeleteNode(cid, nid string) error {
	return t.update("node "+nid+" of cluster "+cid, "DELETE FROM nodes WHERE cid = ? AND nid = ?", cid, nid)
}
