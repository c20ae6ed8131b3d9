package sqlitestore

import (
	"fmt"

	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

func (t *tx) PutAuditEntry(e audit.Entry) (int64, error) {
	var id int64
	err := t.q.QueryRowContext(t.ctx, `INSERT INTO audit_log (at, actor, actor_kind, source, kind, cid, target, outcome)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		sqlcol.Nanos(e.At), e.Actor.Name, e.Actor.Kind, e.Source, e.Kind, e.CID, e.Target, e.Outcome).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("audit %s of %s: %w", e.Kind, e.Target, err)
	}
	for _, aid := range e.AIDs {
		if _, err := t.exec("INSERT INTO audit_accounts (aid, entry_id) VALUES (?, ?)", aid, id); err != nil {
			return 0, fmt.Errorf("audit %s of %s: %w", e.Kind, e.Target, err)
		}
	}
	return id, nil
}

func (t *tx) AuditEntries(f store.AuditFilter) ([]audit.Entry, error) {
	if len(f.AIDs) == 0 {
		return nil, nil
	}
	q := `SELECT a.id, a.at, a.actor, a.actor_kind, a.source, a.kind, a.cid, a.target, a.outcome FROM audit_log a
		WHERE EXISTS (SELECT 1 FROM audit_accounts x WHERE x.entry_id = a.id AND x.aid IN (` + placeholders(len(f.AIDs)) + `))`
	args := anyArgs(f.AIDs)
	if f.CID != "" {
		q += " AND a.cid = ?"
		args = append(args, f.CID)
	}
	if f.Actor != "" {
		q += " AND a.actor = ? COLLATE NOCASE"
		args = append(args, f.Actor)
	}
	if f.Kind != "" {
		q += " AND (a.kind = ? OR a.kind LIKE ? ESCAPE '\\')"
		args = append(args, f.Kind, sqlcol.LikeEscape(f.Kind)+".%")
	}
	if f.Target != "" {
		q += " AND a.target = ?"
		args = append(args, f.Target)
	}
	if f.Before > 0 {
		q += " AND a.id < ?"
		args = append(args, f.Before)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = store.DefaultAuditLimit
	}
	q += " ORDER BY a.id DESC LIMIT ?"
	args = append(args, limit)
	out, err := list(t, "audit log", func(r sqlcol.Row) (audit.Entry, error) {
		var e audit.Entry
		var at int64
		err := r.Scan(&e.ID, &at, &e.Actor.Name, &e.Actor.Kind, &e.Source, &e.Kind, &e.CID, &e.Target, &e.Outcome)
		e.At = sqlcol.Time(at)
		return e, err
	}, q, args...)
	if err != nil {
		return nil, err
	}
	for i := range out {
		id := out[i].ID
		if out[i].AIDs, err = list(t, fmt.Sprintf("audit entry %d", id), sqlcol.String,
			"SELECT aid FROM audit_accounts WHERE entry_id = ? ORDER BY aid", id); err != nil {
			return nil, err
		}
	}
	return out, nil
}
