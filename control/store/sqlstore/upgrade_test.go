package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/storetest"
	"github.com/runos/vpn/internal/pgtest"
)

// A database made by the schema before sqlstore (testdata/schema-19c5c2a-*,
// taken from the stores of that commit), holding a user's devices,
// sessions, services, tokens, audit log and grants, opens with this store
// on either dialect: it migrates in place and every record reads back.

func TestSQLiteUpgradeFrom19c5c2a(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.db")
	db, err := sql.Open("sqlite", sqliteDSN(path, true))
	if err != nil {
		t.Fatal(err)
	}
	oldDatabase(t, db, "sqlite", "user") // the column was "user" on SQLite
	db.Close()
	s, err := OpenSQLite(context.Background(), path, Options{Now: func() time.Time { return storetest.T0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkUpgraded(t, s)
}

func TestPostgresUpgradeFrom19c5c2a(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	oldDatabase(t, db, "postgres", "email")
	db.Close()
	s, err := OpenPostgres(context.Background(), url, Options{Now: func() time.Time { return storetest.T0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkUpgraded(t, s.Store)
}

// oldRows are the records of the old database; {user} is the column of a
// user's email in sessions, devices, revoked_keys and the OAuth codes.
var oldRows = `
INSERT INTO accounts (aid, name, operator_token_hash) VALUES ('ky3', 'Ky', NULL);
INSERT INTO accounts (aid, name, operator_token_hash) VALUES ('k2', 'Kay', NULL);
INSERT INTO users (email, password_hash, operator) VALUES ('Ann@Example.com', 'bcrypt-hash', TRUE);
INSERT INTO user_accounts (email, aid) VALUES ('Ann@Example.com', 'ky3');
INSERT INTO user_accounts (email, aid) VALUES ('Ann@Example.com', 'k2');
INSERT INTO users (email, password_hash, operator) VALUES ('bob@example.com', 'bcrypt-hash', FALSE);
INSERT INTO user_accounts (email, aid) VALUES ('bob@example.com', 'ky3');
INSERT INTO user_accounts (email, aid) VALUES ('bob@example.com', 'k2');
INSERT INTO clusters (cid, aid, name, domain_root, is_configured, user_vpn, custom_domains)
	VALUES ('c1', 'ky3', 'Prod', 'prod.example', TRUE, 'on', '["a.example"]');
INSERT INTO nodes (cid, nid, name, roles, declared_ingress, public_ip, detected_ip, published, enrollment_token_hash,
	last_heartbeat, gateway_key, gateway_version, gateway_started)
	VALUES ('c1', 'n1', 'node one', '["gateway"]', '', '203.0.113.5', '', TRUE, 'enroll-hash', {t0}, 'gw-key', 'v1', {t0});
INSERT INTO services (id, cid, name, node_id, port, state, error, public_key, subnet_index, subnet, created_at, seeded, relay_url)
	VALUES ('svc1', 'c1', 'vpn', 'n1', 51820, 'up', '', 'svc-key', 3, '100.96.3.0/24', {t0}, FALSE, 'https://relay.example');
INSERT INTO moves (id, cid, service_id, from_node, target_node, state, error, endpoint, address_kind, warnings, total, switched,
	switch_ms, prepare_version, started_at, switched_at, last_handshake, finished_at, steps)
	VALUES ('mv1', 'c1', 'svc1', 'n1', 'n1', 'done', '', '203.0.113.5:51820', 'public', '[]', 1, 1, 5, 7, {t0}, {t0}, {t0}, {t0}, '[]');
INSERT INTO sessions (id, token_hash, {user}, client_id, state, created_at, expires_at, ended_at)
	VALUES ('s1', 'session-hash', 'Ann@Example.com', 'runos-cli', 'live', {t0}, {t0+day}, 0);
INSERT INTO devices (id, {user}, name, os, public_key, addr_index, address, session_id, created_at, last_seen, last_handshake, revoked_at, revoked_by)
	VALUES ('d1', 'Ann@Example.com', 'laptop', 'linux', 'device-key', 2, '100.64.0.2', 's1', {t0}, {t0}, {t0}, 0, '');
INSERT INTO memberships (device_id, cid, last_handshake) VALUES ('d1', 'c1', {t0});
INSERT INTO revoked_keys (public_key, device_id, {user}, revoked_at, revoked_by) VALUES ('old-key', 'd0', 'Ann@Example.com', {t0}, 'admin@example.com');
INSERT INTO api_tokens (id, aid, name, token_hash, created_at, created_by, expires_at, last_used, revoked_at, revoked_by)
	VALUES ('tok1', 'ky3', 'ci', 'api-hash', {t0}, 'Ann@Example.com', 0, 0, 0, '');
INSERT INTO audit_log (at, actor, actor_kind, source, kind, cid, target, outcome)
	VALUES ({t0}, 'Ann@Example.com', 'user', '198.51.100.7', 'device.revoke', 'c1', 'd0', 'revoked');
INSERT INTO audit_accounts (aid, entry_id) VALUES ('ky3', 1);
INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, {user}, expires_at)
	VALUES ('code-hash', 'runos-cli', 'http://127.0.0.1/cb', 'challenge', 'Ann@Example.com', {t0+day});
INSERT INTO oauth_device_codes (device_code_hash, user_code, client_id, {user}, approved, denied, expires_at, interval_ns, last_poll)
	VALUES ('device-code-hash', 'ABCD-EFGH', 'runos-cli', 'Ann@Example.com', TRUE, FALSE, {t0+day}, 5000000000, 0);
UPDATE meta SET version = 41;
INSERT INTO topics (topic, version) VALUES ('cluster:c1', 41);
`

func oldDatabase(t *testing.T, db *sql.DB, dialect, userCol string) {
	t.Helper()
	ddl, err := os.ReadFile(filepath.Join("testdata", "schema-19c5c2a-"+dialect+".sql"))
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.NewReplacer("{user}", userCol, "{t0}", fmt.Sprint(storetest.T0.UnixNano()),
		"{t0+day}", fmt.Sprint(storetest.T0.Add(24*time.Hour).UnixNano())).Replace(oldRows)
	for _, q := range []string{string(ddl), rows} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("the old database: %v", err)
		}
	}
}

func checkUpgraded(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	t0 := storetest.T0
	err := s.View(ctx, func(r store.Reader) error {
		if v, err := r.GlobalVersion(); err != nil || v != 41 {
			t.Errorf("global version = %d, %v; want 41", v, err)
		}
		// The operator flag became the operator role in each account of
		// the user (issue 22); a user who was no operator operates none.
		if u, err := r.User("ann@example.com"); err != nil || u.Email != "Ann@Example.com" ||
			!slices.Equal(u.Accounts, []string{"k2", "ky3"}) || !slices.Equal(u.Operates, []string{"k2", "ky3"}) {
			t.Errorf("user = %+v, %v; want operator of k2 and ky3", u, err)
		}
		if u, err := r.User("bob@example.com"); err != nil || len(u.Accounts) != 2 || len(u.Operates) != 0 {
			t.Errorf("user = %+v, %v; want in two accounts, operator of none", u, err)
		}
		if c, err := r.Cluster("c1"); err != nil || !c.IsConfigured || len(c.CustomDomains) != 1 {
			t.Errorf("cluster = %+v, %v", c, err)
		}
		if n, err := r.Node("c1", "n1"); err != nil || !n.Published || n.PublicIP != netip.MustParseAddr("203.0.113.5") || !n.GatewayStartedAt.Equal(t0) {
			t.Errorf("node = %+v, %v", n, err)
		}
		if sv, err := r.Service("svc1"); err != nil || sv.Seeded || sv.RelayURL != "https://relay.example" || sv.Subnet.String() != "100.96.3.0/24" {
			t.Errorf("service = %+v, %v", sv, err)
		}
		if m, err := r.LatestMove("svc1"); err != nil || m.ID != "mv1" || m.PrepareVersion != 7 {
			t.Errorf("latest move = %+v, %v", m, err)
		}
		if se, err := r.SessionByToken("session-hash"); err != nil || se.User != "Ann@Example.com" || se.State != model.SessionLive {
			t.Errorf("session = %+v, %v", se, err)
		}
		if ds, err := r.Devices(store.DeviceFilter{AIDs: []string{"ky3"}, User: "ANN@example.com", CID: "c1"}); err != nil || len(ds) != 1 ||
			ds[0].SessionID != "s1" || ds[0].Address != netip.MustParseAddr("100.64.0.2") {
			t.Errorf("devices of the user = %+v, %v", ds, err)
		}
		if ps, err := r.Peers("c1", t0); err != nil || len(ps) != 1 || ps[0].PublicKey != "device-key" {
			t.Errorf("peers = %+v, %v", ps, err)
		}
		if k, err := r.KeyRevoked("old-key"); err != nil || k.User != "Ann@Example.com" {
			t.Errorf("revoked key = %+v, %v", k, err)
		}
		if ks, err := r.APITokens("ky3"); err != nil || len(ks) != 1 || ks[0].Hash != "api-hash" {
			t.Errorf("tokens = %+v, %v", ks, err)
		}
		if es, err := r.AuditEntries(store.AuditFilter{AIDs: []string{"ky3"}, Kind: "device"}); err != nil || len(es) != 1 ||
			es[0].Target != "d0" || len(es[0].AIDs) != 1 || !es[0].At.Equal(t0) {
			t.Errorf("audit log = %+v, %v", es, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.Grants().DeviceCodeByHash(ctx, "device-code-hash"); err != nil || d.User != "Ann@Example.com" || !d.Approved {
		t.Errorf("device code = %+v, %v", d, err)
	}
	if c, err := s.Grants().TakeAuthCode(ctx, "code-hash"); err != nil || c.User != "Ann@Example.com" {
		t.Errorf("authorization code = %+v, %v", c, err)
	}
	// And it takes changes: a second device, the version bumped from 41.
	ch, err := s.Update(ctx, func(w store.Writer) error {
		w.Touch("user:ann@example.com")
		return w.PutDevice(model.Device{ID: "d2", User: "Ann@Example.com", Name: "phone", PublicKey: "key-2", AddrIndex: 3,
			Address: netip.MustParseAddr("100.64.0.3"), CreatedAt: t0})
	})
	if err != nil || ch.Version != 42 {
		t.Fatalf("a change after the upgrade: %+v, %v", ch, err)
	}
	// The emails are one user without regard to case, on both dialects.
	if _, err := s.Update(ctx, func(w store.Writer) error {
		return w.PutUser(model.User{Email: "ann@example.COM", PasswordHash: "h"})
	}); !errors.Is(err, store.ErrExists) {
		t.Errorf("a second user differing in case: %v, want ErrExists", err)
	}
}
