package pgstore

import (
	"fmt"
	"strings"

	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

func (t *tx) PutAuditEntry(e audit.Entry) (int64, error) {
	var id int64
	err := t.row(`INSERT INTO audit_log (at, actor, actor_kind, source, kind, cid, target, outcome)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
		sqlcol.Nanos(e.At), e.Actor.Name, e.Actor.Kind, e.Source, e.Kind, e.CID, e.Target, e.Outcome).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("audit %s of %s: %w", e.Kind, e.Target, classify(err))
	}
	if len(e.AIDs) > 0 {
		if _, err := t.exec("INSERT INTO audit_accounts (aid, entry_id) SELECT DISTINCT unnest($1::text[]), $2::bigint", e.AIDs, id); err != nil {
			return 0, fmt.Errorf("audit %s of %s: %w", e.Kind, e.Target, classify(err))
		}
	}
	return id, nil
}

func (t *tx) AuditEntries(f store.AuditFilter) ([]audit.Entry, error) {
	if len(f.AIDs) == 0 {
		return nil, nil
	}
	q := `SELECT a.id, a.at, a.actor, a.actor_kind, a.source, a.kind, a.cid, a.target, a.outcome,
		ARRAY(SELECT x.aid FROM audit_accounts x WHERE x.entry_id = a.id ORDER BY x.aid)
		FROM audit_log a WHERE EXISTS (SELECT 1 FROM audit_accounts x WHERE x.entry_id = a.id AND x.aid = ANY($1))`
	args := []any{f.AIDs}
	add := func(cond string, v any) {
		args = append(args, v)
		q += " AND " + strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(args)))
	}
	if f.CID != "" {
		add("a.cid = ?", f.CID)
	}
	if f.Actor != "" {
		add("lower(a.actor) = lower(?)", f.Actor)
	}
	if f.Kind != "" {
		args = append(args, f.Kind, sqlcol.LikeEscape(f.Kind)+".%")
		q += fmt.Sprintf(" AND (a.kind = $%d OR a.kind LIKE $%d ESCAPE '\\')", len(args)-1, len(args))
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
	args = append(args, limit)
	q += fmt.Sprintf(" ORDER BY a.id DESC LIMIT $%d", len(args))
	return list(t, "audit log", func(r sqlcol.Row) (audit.Entry, error) {
		var e audit.Entry
		var at int64
		err := r.Scan(&e.ID, &at, &e.Actor.Name, &e.Actor.Kind, &e.Source, &e.Kind, &e.CID, &e.Target, &e.Outcome, &e.AIDs)
		e.At = sqlcol.Time(at)
		return e, err
	}, q, args...)
}
