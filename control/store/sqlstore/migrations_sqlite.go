package sqlstore

// sqliteMigrations are numbered from 1 and applied in order, each in its
// own transaction, recorded in schema_migrations. Never edit one that
// shipped: append a new one. The schema they make is pgMigrations' in
// SQLite's types (INTEGER for BIGINT and BOOLEAN, BLOB for BYTEA), with
// rowid where PostgreSQL has a seq column.
var sqliteMigrations = []string{
	1: `
CREATE TABLE meta (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	version INTEGER NOT NULL
);
INSERT INTO meta (id, version) VALUES (1, 0);

CREATE TABLE topics (
	topic   TEXT PRIMARY KEY,
	version INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE accounts (
	aid                 TEXT PRIMARY KEY,
	name                TEXT NOT NULL,
	operator_token_hash TEXT UNIQUE
);

CREATE TABLE users (
	email         TEXT PRIMARY KEY,
	password_hash TEXT NOT NULL,
	operator      INTEGER NOT NULL
);

CREATE TABLE user_accounts (
	email TEXT NOT NULL REFERENCES users(email) ON DELETE CASCADE,
	aid   TEXT NOT NULL REFERENCES accounts(aid) ON DELETE CASCADE,
	PRIMARY KEY (email, aid)
) WITHOUT ROWID;

CREATE TABLE clusters (
	cid            TEXT PRIMARY KEY,
	aid            TEXT NOT NULL REFERENCES accounts(aid),
	name           TEXT NOT NULL,
	domain_root    TEXT NOT NULL,
	is_configured  INTEGER NOT NULL,
	user_vpn       TEXT NOT NULL,
	custom_domains TEXT NOT NULL
);
CREATE INDEX clusters_aid ON clusters(aid);

CREATE TABLE nodes (
	cid                   TEXT NOT NULL REFERENCES clusters(cid) ON DELETE CASCADE,
	nid                   TEXT NOT NULL,
	name                  TEXT NOT NULL,
	roles                 TEXT NOT NULL,
	declared_ingress      TEXT NOT NULL,
	public_ip             TEXT NOT NULL,
	detected_ip           TEXT NOT NULL,
	published             INTEGER NOT NULL,
	enrollment_token_hash TEXT NOT NULL UNIQUE,
	last_heartbeat        INTEGER NOT NULL,
	gateway_key           TEXT NOT NULL,
	gateway_version       TEXT NOT NULL,
	PRIMARY KEY (cid, nid)
);

CREATE TABLE services (
	id           TEXT PRIMARY KEY,
	cid          TEXT NOT NULL UNIQUE REFERENCES clusters(cid),
	name         TEXT NOT NULL,
	node_id      TEXT NOT NULL,
	port         INTEGER NOT NULL,
	state        TEXT NOT NULL,
	error        TEXT NOT NULL,
	public_key   TEXT NOT NULL,
	subnet_index INTEGER NOT NULL UNIQUE,
	subnet       TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	seeded       INTEGER NOT NULL,
	FOREIGN KEY (cid, node_id) REFERENCES nodes(cid, nid)
);

CREATE TABLE moves (
	id              TEXT PRIMARY KEY,
	cid             TEXT NOT NULL,
	service_id      TEXT NOT NULL REFERENCES services(id),
	from_node       TEXT NOT NULL,
	target_node     TEXT NOT NULL,
	state           TEXT NOT NULL,
	error           TEXT NOT NULL,
	endpoint        TEXT NOT NULL,
	address_kind    TEXT NOT NULL,
	warnings        TEXT NOT NULL,
	total           INTEGER NOT NULL,
	switched        INTEGER NOT NULL,
	switch_ms       INTEGER NOT NULL,
	prepare_version INTEGER NOT NULL,
	started_at      INTEGER NOT NULL,
	switched_at     INTEGER NOT NULL,
	last_handshake  INTEGER NOT NULL,
	finished_at     INTEGER NOT NULL,
	steps           TEXT NOT NULL
);
CREATE INDEX moves_in_flight ON moves(service_id) WHERE state IN ('preparing', 'switching');

CREATE TABLE move_switched (
	move_id    TEXT NOT NULL REFERENCES moves(id) ON DELETE CASCADE,
	public_key TEXT NOT NULL,
	PRIMARY KEY (move_id, public_key)
) WITHOUT ROWID;

CREATE TABLE sessions (
	id         TEXT PRIMARY KEY,
	token_hash TEXT NOT NULL UNIQUE,
	user       TEXT NOT NULL REFERENCES users(email) ON DELETE CASCADE,
	client_id  TEXT NOT NULL,
	state      TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	ended_at   INTEGER NOT NULL
);
CREATE INDEX sessions_live_expiry ON sessions(expires_at) WHERE state = 'live';
CREATE INDEX sessions_ended ON sessions(ended_at) WHERE state <> 'live';

CREATE TABLE devices (
	id         TEXT PRIMARY KEY,
	user       TEXT NOT NULL REFERENCES users(email) ON DELETE CASCADE,
	name       TEXT NOT NULL,
	os         TEXT NOT NULL,
	public_key TEXT NOT NULL UNIQUE,
	addr_index INTEGER NOT NULL UNIQUE,
	address    TEXT NOT NULL,
	session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX devices_session ON devices(session_id);

CREATE TABLE memberships (
	device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
	cid       TEXT NOT NULL REFERENCES clusters(cid) ON DELETE CASCADE,
	PRIMARY KEY (device_id, cid)
) WITHOUT ROWID;
CREATE INDEX memberships_cid ON memberships(cid, device_id);

CREATE TABLE oauth_codes (
	code_hash      TEXT PRIMARY KEY,
	client_id      TEXT NOT NULL,
	redirect_uri   TEXT NOT NULL,
	code_challenge TEXT NOT NULL,
	user           TEXT NOT NULL,
	expires_at     INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE oauth_device_codes (
	device_code_hash TEXT PRIMARY KEY,
	user_code        TEXT NOT NULL UNIQUE,
	client_id        TEXT NOT NULL,
	user             TEXT NOT NULL,
	approved         INTEGER NOT NULL,
	denied           INTEGER NOT NULL,
	expires_at       INTEGER NOT NULL,
	interval_ns      INTEGER NOT NULL,
	last_poll        INTEGER NOT NULL
) WITHOUT ROWID;
`,
	// 2: devices, sessions and tokens an operator manages, and the audit
	// log (issue 12). The world file's operator token becomes the
	// account's first API token, named world-file.
	2: `
ALTER TABLE devices ADD COLUMN last_seen INTEGER NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN last_handshake INTEGER NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN revoked_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN revoked_by TEXT NOT NULL DEFAULT '';
CREATE INDEX devices_user ON devices(user COLLATE NOCASE);
ALTER TABLE memberships ADD COLUMN last_handshake INTEGER NOT NULL DEFAULT 0;

CREATE TABLE revoked_keys (
	public_key TEXT PRIMARY KEY,
	device_id  TEXT NOT NULL,
	user       TEXT NOT NULL,
	revoked_at INTEGER NOT NULL,
	revoked_by TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE api_tokens (
	id         TEXT PRIMARY KEY,
	aid        TEXT NOT NULL REFERENCES accounts(aid) ON DELETE CASCADE,
	name       TEXT NOT NULL,
	token_hash TEXT NOT NULL UNIQUE,
	created_at INTEGER NOT NULL,
	created_by TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	last_used  INTEGER NOT NULL,
	revoked_at INTEGER NOT NULL,
	revoked_by TEXT NOT NULL
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens(aid, name) WHERE revoked_at = 0;
CREATE INDEX api_tokens_aid ON api_tokens(aid, created_at);
INSERT INTO api_tokens (id, aid, name, token_hash, created_at, created_by, expires_at, last_used, revoked_at, revoked_by)
	SELECT 'tok-world-' || aid, aid, 'world-file', operator_token_hash, 0, 'world file', 0, 0, 0, ''
	FROM accounts WHERE operator_token_hash IS NOT NULL;
UPDATE accounts SET operator_token_hash = NULL;

CREATE TABLE audit_log (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	at         INTEGER NOT NULL,
	actor      TEXT NOT NULL,
	actor_kind TEXT NOT NULL,
	source     TEXT NOT NULL,
	kind       TEXT NOT NULL,
	cid        TEXT NOT NULL,
	target     TEXT NOT NULL,
	outcome    TEXT NOT NULL
);
CREATE TABLE audit_accounts (
	aid      TEXT NOT NULL,
	entry_id INTEGER NOT NULL REFERENCES audit_log(id) ON DELETE CASCADE,
	PRIMARY KEY (aid, entry_id)
) WITHOUT ROWID;
`,
	// 3: when a node's gateway last started (issue 10): devices handshake
	// again at once when the serving one restarts.
	3: `ALTER TABLE nodes ADD COLUMN gateway_started INTEGER NOT NULL DEFAULT 0;`,
	// 4: several replicas (issue 13): topics read by version after a lost
	// notification, a shared secret, the slow-down counters, indexes for
	// purging expired grants and re-arming install timeouts.
	4: `
CREATE INDEX topics_version ON topics(version);

CREATE TABLE secrets (
	name  TEXT PRIMARY KEY,
	value BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE throttle (
	key        TEXT PRIMARY KEY,
	n          INTEGER NOT NULL,
	first      INTEGER NOT NULL,
	last       INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX throttle_expiry ON throttle(expires_at);

CREATE INDEX oauth_codes_expiry ON oauth_codes(expires_at);
CREATE INDEX oauth_device_codes_expiry ON oauth_device_codes(expires_at);
CREATE INDEX services_installing ON services(state) WHERE state = 'installing';
`,
	// 5: a VPN service's relay URL override (issue 14).
	5: `ALTER TABLE services ADD COLUMN relay_url TEXT NOT NULL DEFAULT '';`,
	// 6: one schema with PostgreSQL's (issue 20): a user's email is in a
	// column named email everywhere, and matched without regard to case
	// through lower(email), as PostgreSQL's indexes have it (control/seed
	// already refuses two users whose emails differ only in case).
	6: `
ALTER TABLE sessions RENAME COLUMN user TO email;
DROP INDEX devices_user;
ALTER TABLE devices RENAME COLUMN user TO email;
CREATE INDEX devices_user ON devices(lower(email));
ALTER TABLE oauth_codes RENAME COLUMN user TO email;
ALTER TABLE oauth_device_codes RENAME COLUMN user TO email;
ALTER TABLE revoked_keys RENAME COLUMN user TO email;
CREATE UNIQUE INDEX users_email_lower ON users(lower(email));
`,
	// 7: what lies inside a cluster, as its gateways report it (issue 21).
	7: `
CREATE TABLE cluster_inside (
	cid    TEXT PRIMARY KEY REFERENCES clusters(cid) ON DELETE CASCADE,
	inside TEXT NOT NULL
) WITHOUT ROWID;
`,
	// 8: access policies and groups (issue 23): the document in force per
	// account, the ones it replaced, and the account's groups of users.
	8: `
CREATE TABLE policies (
	aid      TEXT PRIMARY KEY REFERENCES accounts(aid) ON DELETE CASCADE,
	version  INTEGER NOT NULL,
	document TEXT NOT NULL,
	set_by   TEXT NOT NULL,
	set_at   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE policy_history (
	aid      TEXT NOT NULL REFERENCES accounts(aid) ON DELETE CASCADE,
	version  INTEGER NOT NULL,
	document TEXT NOT NULL,
	set_by   TEXT NOT NULL,
	set_at   INTEGER NOT NULL,
	PRIMARY KEY (aid, version)
) WITHOUT ROWID;
CREATE TABLE user_groups (
	aid  TEXT NOT NULL REFERENCES accounts(aid) ON DELETE CASCADE,
	name TEXT NOT NULL,
	PRIMARY KEY (aid, name)
) WITHOUT ROWID;
CREATE TABLE group_members (
	aid   TEXT NOT NULL,
	grp   TEXT NOT NULL,
	email TEXT NOT NULL,
	PRIMARY KEY (aid, grp, email),
	FOREIGN KEY (aid, grp) REFERENCES user_groups(aid, name) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX group_members_email ON group_members(aid, email);
`,
	// 9: operator is a role a user has in an account, not a flag of the
	// user (issue 22): today's operators keep it in every account they
	// belong to, and the flag goes.
	9: `
ALTER TABLE user_accounts ADD COLUMN operator INTEGER NOT NULL DEFAULT 0;
UPDATE user_accounts SET operator = 1 WHERE email IN (SELECT email FROM users WHERE operator <> 0);
ALTER TABLE users DROP COLUMN operator;
`,
	// 10: the identity provider's refresh token of each user who signed
	// in through it (issue 23), sealed by control, to ask the provider
	// about the user again while their sessions live.
	10: `
CREATE TABLE identity_grants (
	email        TEXT PRIMARY KEY,
	subject      TEXT NOT NULL,
	refresh      BLOB NOT NULL,
	signed_in_at INTEGER NOT NULL
) WITHOUT ROWID;
`,
}
