package sqlstore

import (
	"fmt"
	"slices"

	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

func (t *tx) PutAuditEntry(e audit.Entry) (int64, error) {
	what := fmt.Sprintf("audit %s of %s", e.Kind, e.Target)
	var id int64
	err := t.row(`INSERT INTO audit_log (at, actor, actor_kind, source, kind, cid, target, outcome)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		sqlcol.Nanos(e.At), e.Actor.Name, e.Actor.Kind, e.Source, e.Kind, e.CID, e.Target, e.Outcome).Scan(&id)
	if err != nil {
		return 0, t.fail(err, what)
	}
	aids := slices.Compact(slices.Sorted(slices.Values(e.AIDs)))
	if len(aids) == 0 {
		return id, nil
	}
	args := make([]any, 0, 2*len(aids))
	for _, aid := range aids {
		args = append(args, aid, id)
	}
	_, err = t.exec("INSERT INTO audit_accounts (aid, entry_id) VALUES "+tuples(len(aids), "(?, ?)"), args...)
	return id, t.fail(err, what)
}

func (t *tx) AuditEntries(f store.AuditFilter) ([]audit.Entry, error) {
	if len(f.AIDs) == 0 {
		return nil, nil
	}
	q := `SELECT a.id, a.at, a.actor, a.actor_kind, a.source, a.kind, a.cid, a.target, a.outcome FROM audit_log a
		WHERE EXISTS (SELECT 1 FROM audit_accounts x WHERE x.entry_id = a.id AND x.aid IN (` + marks(len(f.AIDs)) + `))`
	args := anyArgs(f.AIDs)
	add := func(cond string, v ...any) {
		q += " AND " + cond
		args = append(args, v...)
	}
	if f.CID != "" {
		add("a.cid = ?", f.CID)
	}
	if f.Actor != "" {
		add("lower(a.actor) = lower(?)", f.Actor)
	}
	if f.Kind != "" {
		add("(a.kind = ? OR a.kind LIKE ? ESCAPE '\\')", f.Kind, sqlcol.LikeEscape(f.Kind)+".%")
	}
	if f.Target != "" {
		add("a.target = ?", f.Target)
	}
	if f.Before > 0 {
		add("a.id < ?", f.Before)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = store.DefaultAuditLimit
	}
	q += " ORDER BY a.id DESC LIMIT ?"
	args = append(args, limit)
	out, err := list(t.conn, "audit log", func(r sqlcol.Row) (audit.Entry, error) {
		var e audit.Entry
		var at int64
		err := r.Scan(&e.ID, &at, &e.Actor.Name, &e.Actor.Kind, &e.Source, &e.Kind, &e.CID, &e.Target, &e.Outcome)
		e.At = sqlcol.Time(at)
		return e, err
	}, q, args...)
	if err != nil || len(out) == 0 {
		return out, err
	}
	return out, t.auditAccounts(out)
}

// auditAccounts fills in the accounts of entries, in one query.
func (t *tx) auditAccounts(entries []audit.Entry) error {
	index := make(map[int64]int, len(entries))
	ids := make([]any, len(entries))
	for i, e := range entries {
		index[e.ID], ids[i] = i, e.ID
	}
	type pair struct {
		id  int64
		aid string
	}
	pairs, err := list(t.conn, "audit log accounts", func(r sqlcol.Row) (pair, error) {
		var p pair
		return p, r.Scan(&p.id, &p.aid)
	}, "SELECT entry_id, aid FROM audit_accounts WHERE entry_id IN ("+marks(len(ids))+") ORDER BY entry_id, aid", ids...)
	for _, p := range pairs {
		e := &entries[index[p.id]]
		e.AIDs = append(e.AIDs, p.aid)
	}
	return err
}
