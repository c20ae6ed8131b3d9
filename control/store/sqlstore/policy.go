package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

func (t *tx) Policy(aid string) (model.Policy, error) {
	p := model.Policy{AID: aid}
	var version, at int64
	err := t.row("SELECT version, document, set_by, set_at FROM policies WHERE aid = ?", aid).Scan(&version, &p.Document, &p.SetBy, &at)
	p.Version, p.SetAt = uint64(version), sqlcol.Time(at)
	return p, t.one(err, "policy of "+aid)
}

func (t *tx) PutPolicy(p model.Policy) error {
	what := fmt.Sprintf("policy version %d of %s", p.Version, p.AID)
	var current int64
	err := t.row("SELECT version FROM policies WHERE aid = ?", p.AID).Scan(&current)
	switch {
	case err == nil && uint64(current) >= p.Version:
		return fmt.Errorf("%s: version %d in force: %w", what, current, store.ErrExists)
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return t.fail(err, what)
	}
	args := []any{p.AID, int64(p.Version), p.Document, p.SetBy, sqlcol.Nanos(p.SetAt)}
	_, err = t.exec(`INSERT INTO policies (aid, version, document, set_by, set_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (aid) DO UPDATE SET version = excluded.version, document = excluded.document,
		set_by = excluded.set_by, set_at = excluded.set_at`, args...)
	if err != nil {
		return t.fail(err, what)
	}
	return t.insert(what+" in the history", "INSERT INTO policy_history (aid, version, document, set_by, set_at) VALUES (?, ?, ?, ?, ?)", args...)
}

func (t *tx) Groups(aid string) ([]model.Group, error) {
	type row struct{ name, email string }
	rows, err := list(t.conn, "groups of "+aid, func(r sqlcol.Row) (row, error) {
		var x row
		var email sql.NullString
		err := r.Scan(&x.name, &email)
		x.email = email.String
		return x, err
	}, `SELECT g.name, m.email FROM user_groups g LEFT JOIN group_members m ON m.aid = g.aid AND m.grp = g.name
		WHERE g.aid = ? ORDER BY g.name, m.email`, aid)
	if err != nil {
		return nil, err
	}
	var out []model.Group
	for _, x := range rows {
		if len(out) == 0 || out[len(out)-1].Name != x.name {
			out = append(out, model.Group{AID: aid, Name: x.name, Members: []string{}})
		}
		if x.email != "" {
			g := &out[len(out)-1]
			g.Members = append(g.Members, x.email)
		}
	}
	return out, nil
}

func (t *tx) UserGroups(aid, email string) ([]string, error) {
	return list(t.conn, "groups of "+email, func(r sqlcol.Row) (string, error) {
		var g string
		return g, r.Scan(&g)
	}, "SELECT grp FROM group_members WHERE aid = ? AND email = ? ORDER BY grp", aid, strings.ToLower(email))
}

func (t *tx) PutGroup(aid, name string) error {
	return t.insert("group "+name+" of "+aid, "INSERT INTO user_groups (aid, name) VALUES (?, ?)", aid, name)
}

func (t *tx) PutGroupMember(aid, group, email string) error {
	what := fmt.Sprintf("member %s of group %s", email, group)
	var n int
	if err := t.row("SELECT COUNT(*) FROM user_groups WHERE aid = ? AND name = ?", aid, group).Scan(&n); err != nil {
		return t.fail(err, what)
	}
	if n == 0 {
		return fmt.Errorf("group %s of %s: %w", group, aid, store.ErrNotFound)
	}
	return t.insert(what, "INSERT INTO group_members (aid, grp, email) VALUES (?, ?, ?)", aid, group, strings.ToLower(email))
}

func (t *tx) DeleteGroupMember(aid, group, email string) error {
	return t.update(fmt.Sprintf("member %s of group %s", email, group),
		"DELETE FROM group_members WHERE aid = ? AND grp = ? AND email = ?", aid, group, strings.ToLower(email))
}
