package pgstore

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/jackc/pgx/v5"

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
	s, err := scanService(t.row("SELECT "+serviceCols+" FROM services WHERE id = $1", id))
	return s, one(err, "service "+id)
}

func (t *tx) Services(cid string) ([]model.Service, error) {
	return list(t, "services of "+cid, scanService, "SELECT "+serviceCols+" FROM services WHERE cid = $1 ORDER BY id", cid)
}

func (t *tx) InstallingServices() ([]model.Service, error) {
	return list(t, "services installing", scanService, "SELECT "+serviceCols+" FROM services WHERE state = 'installing' ORDER BY id")
}

func (t *tx) FreeServiceSubnetIndex(lo, hi int) (int, error) {
	return freeIndex(t, "services", "subnet_index", lo, hi)
}

// freeIndex finds a free integer in [lo, hi] for table.col (which has a
// UNIQUE index): one past the highest in use while that fits (one index
// lookup), else the lowest gap (a scan, only once the pool wrapped). The
// change holds the version row's lock, so no other replica allocates
// between this read and the insert; the unique index stays as the last
// word.
func freeIndex(t *tx, table, col string, lo, hi int) (int, error) {
	var top *int64
	if err := t.row(fmt.Sprintf("SELECT MAX(%s) FROM %s", col, table)).Scan(&top); err != nil {
		return 0, fmt.Errorf("allocate %s: %w", col, classify(err))
	}
	if top == nil || int(*top) < lo {
		return lo, nil
	}
	if n := int(*top) + 1; n <= hi {
		return n, nil
	}
	var n int
	q := fmt.Sprintf(`SELECT v FROM (
		SELECT $1::integer AS v WHERE NOT EXISTS (SELECT 1 FROM %[1]s WHERE %[2]s = $1)
		UNION ALL
		SELECT a.%[2]s + 1 FROM %[1]s a WHERE a.%[2]s >= $1 AND a.%[2]s < $2
			AND NOT EXISTS (SELECT 1 FROM %[1]s b WHERE b.%[2]s = a.%[2]s + 1)
	) x ORDER BY v LIMIT 1`, table, col)
	if err := t.row(q, lo, hi).Scan(&n); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, store.ErrPoolFull
		}
		return 0, fmt.Errorf("allocate %s: %w", col, classify(err))
	}
	return n, nil
}

func serviceArgs(s model.Service) []any {
	return []any{s.CID, s.Name, s.NodeID, s.Port, s.State, s.Error, s.PublicKey, s.SubnetIndex, s.Subnet.String(), sqlcol.Nanos(s.CreatedAt), s.Seeded, s.RelayURL}
}

func (t *tx) PutService(s model.Service) error {
	return t.insert("service "+s.ID, "INSERT INTO services ("+serviceCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
		append([]any{s.ID}, serviceArgs(s)...)...)
}

func (t *tx) UpdateService(s model.Service) error {
	tag, err := t.exec(`UPDATE services SET cid = $1, name = $2, node_id = $3, port = $4, state = $5, error = $6,
		public_key = $7, subnet_index = $8, subnet = $9, created_at = $10, seeded = $11, relay_url = $12 WHERE id = $13`,
		append(serviceArgs(s), s.ID)...)
	return mustAffect(tag, err, "service "+s.ID)
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
	m, err := scanMove(t.row("SELECT "+moveCols+" FROM moves WHERE id = $1", id))
	return m, one(err, "move "+id)
}

func (t *tx) InFlightMove(serviceID string) (model.Move, error) {
	m, err := scanMove(t.row("SELECT "+moveCols+
		" FROM moves WHERE service_id = $1 AND state IN ('preparing', 'switching') ORDER BY started_at DESC LIMIT 1", serviceID))
	return m, one(err, "move of service "+serviceID)
}

func (t *tx) LatestMove(serviceID string) (model.Move, error) {
	m, err := scanMove(t.row("SELECT "+moveCols+
		" FROM moves WHERE service_id = $1 ORDER BY started_at DESC, seq DESC LIMIT 1", serviceID))
	return m, one(err, "latest move of service "+serviceID)
}

func (t *tx) InFlightMoves() ([]model.Move, error) {
	return list(t, "moves in flight", scanMove, "SELECT "+moveCols+" FROM moves WHERE state IN ('preparing', 'switching') ORDER BY started_at")
}

func moveArgs(m model.Move) []any {
	return []any{m.CID, m.ServiceID, m.FromNodeID, m.TargetNodeID, m.State, m.Error, m.Endpoint, m.AddressKind,
		sqlcol.JSON(sqlcol.NonNil(m.Warnings)), m.Total, m.Switched, m.SwitchMs, int64(m.PrepareVersion),
		sqlcol.Nanos(m.StartedAt), sqlcol.Nanos(m.SwitchedAt), sqlcol.Nanos(m.LastHandshake), sqlcol.Nanos(m.FinishedAt), sqlcol.JSON(m.Steps)}
}

func (t *tx) PutMove(m model.Move) error {
	return t.insert("move "+m.ID, "INSERT INTO moves ("+moveCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)",
		append([]any{m.ID}, moveArgs(m)...)...)
}

func (t *tx) UpdateMove(m model.Move) error {
	tag, err := t.exec(`UPDATE moves SET cid = $1, service_id = $2, from_node = $3, target_node = $4, state = $5, error = $6,
		endpoint = $7, address_kind = $8, warnings = $9, total = $10, switched = $11, switch_ms = $12, prepare_version = $13,
		started_at = $14, switched_at = $15, last_handshake = $16, finished_at = $17, steps = $18 WHERE id = $19`,
		append(moveArgs(m), m.ID)...)
	return mustAffect(tag, err, "move "+m.ID)
}

func (t *tx) MoveSwitched(moveID, publicKey string) (bool, error) {
	var ok bool
	err := t.row("SELECT EXISTS (SELECT 1 FROM move_switched WHERE move_id = $1 AND public_key = $2)", moveID, publicKey).Scan(&ok)
	return ok, one(err, "move "+moveID)
}

func (t *tx) AddMoveSwitched(moveID, publicKey string) (bool, error) {
	tag, err := t.exec("INSERT INTO move_switched (move_id, public_key) VALUES ($1, $2) ON CONFLICT DO NOTHING", moveID, publicKey)
	if err != nil {
		return false, fmt.Errorf("move %s: %w", moveID, classify(err))
	}
	return tag.RowsAffected() > 0, nil
}
