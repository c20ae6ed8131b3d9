package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"net/netip"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

const serviceCols = "id, cid, name, node_id, port, state, error, public_key, subnet_index, subnet, created_at, seeded, relay_url"

func scanService(row sqlcol.Row) (model.Service, error) {
	var s model.Service
	var subnet string
	var created int64
	if err := row.Scan(&s.ID, &s.CID, &s.Name, &s.NodeID, &s.Port, &s.State, &s.Error, &s.PublicKey,
		&s.SubnetIndex, &subnet, &created, &s.Seeded, &s.RelayURL); err != nil {
		return s, err
	}
	s.Subnet, _ = netip.ParsePrefix(subnet)
	s.CreatedAt = sqlcol.Time(created)
	return s, nil
}

func (t *tx) Service(id string) (model.Service, error) {
	s, err := scanService(t.row("SELECT "+serviceCols+" FROM services WHERE id = ?", id))
	return s, t.one(err, "service "+id)
}

func (t *tx) Services(cid string) ([]model.Service, error) {
	return list(t.conn, "services of "+cid, scanService, "SELECT "+serviceCols+" FROM services WHERE cid = ? ORDER BY id", cid)
}

func (t *tx) InstallingServices() ([]model.Service, error) {
	return list(t.conn, "services installing", scanService, "SELECT "+serviceCols+" FROM services WHERE state = 'installing' ORDER BY id")
}

func (t *tx) FreeServiceSubnetIndex(lo, hi int) (int, error) {
	return t.freeIndex("services", "subnet_index", lo, hi)
}

// freeIndex finds a free integer in [lo, hi] for table.col (which has a
// UNIQUE index): one past the highest in use while that fits (one index
// lookup), else the lowest gap (a scan, only once the pool wrapped). No
// other change commits between this read and the insert (Update); the
// unique index stays as the last word.
func (t *tx) freeIndex(table, col string, lo, hi int) (int, error) {
	what := "allocate " + col
	var top sql.NullInt64
	if err := t.row(fmt.Sprintf("SELECT MAX(%s) FROM %s", col, table)).Scan(&top); err != nil {
		return 0, t.fail(err, what)
	}
	if !top.Valid || int(top.Int64) < lo {
		return lo, nil
	}
	if n := int(top.Int64) + 1; n <= hi {
		return n, nil
	}
	var n int
	q := fmt.Sprintf(`SELECT v FROM (
		SELECT CAST(? AS INTEGER) AS v WHERE NOT EXISTS (SELECT 1 FROM %[1]s WHERE %[2]s = ?)
		UNION ALL
		SELECT a.%[2]s + 1 FROM %[1]s a WHERE a.%[2]s >= ? AND a.%[2]s < ?
			AND NOT EXISTS (SELECT 1 FROM %[1]s b WHERE b.%[2]s = a.%[2]s + 1)
	) x ORDER BY v LIMIT 1`, table, col)
	if err := t.row(q, lo, lo, lo, hi).Scan(&n); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, store.ErrPoolFull
		}
		return 0, t.fail(err, what)
	}
	return n, nil
}

func serviceArgs(s model.Service) []any {
	return []any{s.CID, s.Name, s.NodeID, s.Port, s.State, s.Error, s.PublicKey, s.SubnetIndex, s.Subnet.String(), sqlcol.Nanos(s.CreatedAt), s.Seeded, s.RelayURL}
}

func (t *tx) PutService(s model.Service) error {
	return t.insert("service "+s.ID, "INSERT INTO services ("+serviceCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		append([]any{s.ID}, serviceArgs(s)...)...)
}

func (t *tx) UpdateService(s model.Service) error {
	return t.update("service "+s.ID, `UPDATE services SET cid = ?, name = ?, node_id = ?, port = ?, state = ?, error = ?,
		public_key = ?, subnet_index = ?, subnet = ?, created_at = ?, seeded = ?, relay_url = ? WHERE id = ?`,
		append(serviceArgs(s), s.ID)...)
}

// Moves.

const moveCols = `id, cid, service_id, from_node, target_node, state, error, endpoint, address_kind, warnings,
	total, switched, switch_ms, prepare_version, started_at, switched_at, last_handshake, finished_at, steps`

func scanMove(row sqlcol.Row) (model.Move, error) {
	var m model.Move
	var warnings, steps string
	var prepare, started, switched, last, finished int64
	if err := row.Scan(&m.ID, &m.CID, &m.ServiceID, &m.FromNodeID, &m.TargetNodeID, &m.State, &m.Error,
		&m.Endpoint, &m.AddressKind, &warnings, &m.Total, &m.Switched, &m.SwitchMs, &prepare,
		&started, &switched, &last, &finished, &steps); err != nil {
		return m, err
	}
	m.PrepareVersion = uint64(prepare)
	m.StartedAt, m.SwitchedAt, m.LastHandshake, m.FinishedAt = sqlcol.Time(started), sqlcol.Time(switched), sqlcol.Time(last), sqlcol.Time(finished)
	if err := sqlcol.FromJSON(warnings, &m.Warnings); err != nil {
		return m, err
	}
	return m, sqlcol.FromJSON(steps, &m.Steps)
}

func (t *tx) Move(id string) (model.Move, error) {
	m, err := scanMove(t.row("SELECT "+moveCols+" FROM moves WHERE id = ?", id))
	return m, t.one(err, "move "+id)
}

func (t *tx) InFlightMove(serviceID string) (model.Move, error) {
	m, err := scanMove(t.row("SELECT "+moveCols+
		" FROM moves WHERE service_id = ? AND state IN ('preparing', 'switching') ORDER BY started_at DESC LIMIT 1", serviceID))
	return m, t.one(err, "move of service "+serviceID)
}

func (t *tx) LatestMove(serviceID string) (model.Move, error) {
	m, err := scanMove(t.row("SELECT "+moveCols+
		" FROM moves WHERE service_id = ? ORDER BY started_at DESC, "+t.s.sql.insertOrder+" DESC LIMIT 1", serviceID))
	return m, t.one(err, "latest move of service "+serviceID)
}

func (t *tx) InFlightMoves() ([]model.Move, error) {
	return list(t.conn, "moves in flight", scanMove, "SELECT "+moveCols+" FROM moves WHERE state IN ('preparing', 'switching') ORDER BY started_at")
}

func moveArgs(m model.Move) []any {
	return []any{m.CID, m.ServiceID, m.FromNodeID, m.TargetNodeID, m.State, m.Error, m.Endpoint, m.AddressKind,
		sqlcol.JSON(sqlcol.NonNil(m.Warnings)), m.Total, m.Switched, m.SwitchMs, int64(m.PrepareVersion),
		sqlcol.Nanos(m.StartedAt), sqlcol.Nanos(m.SwitchedAt), sqlcol.Nanos(m.LastHandshake), sqlcol.Nanos(m.FinishedAt), sqlcol.JSON(m.Steps)}
}

func (t *tx) PutMove(m model.Move) error {
	return t.insert("move "+m.ID, "INSERT INTO moves ("+moveCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		append([]any{m.ID}, moveArgs(m)...)...)
}

func (t *tx) UpdateMove(m model.Move) error {
	return t.update("move "+m.ID, `UPDATE moves SET cid = ?, service_id = ?, from_node = ?, target_node = ?, state = ?, error = ?,
		endpoint = ?, address_kind = ?, warnings = ?, total = ?, switched = ?, switch_ms = ?, prepare_version = ?,
		started_at = ?, switched_at = ?, last_handshake = ?, finished_at = ?, steps = ? WHERE id = ?`,
		append(moveArgs(m), m.ID)...)
}

func (t *tx) MoveSwitched(moveID, publicKey string) (bool, error) {
	var ok bool
	err := t.row("SELECT EXISTS (SELECT 1 FROM move_switched WHERE move_id = ? AND public_key = ?)", moveID, publicKey).Scan(&ok)
	return ok, t.fail(err, "move "+moveID)
}

func (t *tx) AddMoveSwitched(moveID, publicKey string) (bool, error) {
	res, err := t.exec("INSERT INTO move_switched (move_id, public_key) VALUES (?, ?) ON CONFLICT DO NOTHING", moveID, publicKey)
	n, err := t.affected(res, err, "move "+moveID)
	return n > 0, err
}
