package sqlstore

// pgMigrations are numbered from 1 and applied in order at start, each in
// its own transaction, under an advisory lock so that replicas starting
// together migrate once. Never edit one that shipped: append a new one.
// Times are Unix nanoseconds (0: none), as on SQLite (sqliteMigrations).
var pgMigrations = []string{
	1: `
CREATE TABLE meta (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	version BIGINT NOT NULL
);
INSERT INTO meta (id, version) VALUES (1, 0);

CREATE TABLE topics (
	topic   TEXT PRIMARY KEY,
	version BIGINT NOT NULL
);
CREATE INDEX topics_version ON topics(version);

CREATE TABLE accounts (
	aid                 TEXT PRIMARY KEY,
	name                TEXT NOT NULL,
	operator_token_hash TEXT UNIQUE
);

CREATE TABLE users (
	email         TEXT PRIMARY KEY,
	password_hash TEXT NOT NULL,
	operator      BOOLEAN NOT NULL
);
CREATE UNIQUE INDEX users_email_lower ON users(lower(email));

CREATE TABLE user_accounts (
	email TEXT NOT NULL REFERENCES users(email) ON DELETE CASCADE,
	aid   TEXT NOT NULL REFERENCES accounts(aid) ON DELETE CASCADE,
	PRIMARY KEY (email, aid)
);

CREATE TABLE clusters (
	cid            TEXT PRIMARY KEY,
	aid            TEXT NOT NULL REFERENCES accounts(aid),
	name           TEXT NOT NULL,
	domain_root    TEXT NOT NULL,
	is_configured  BOOLEAN NOT NULL,
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
	published             BOOLEAN NOT NULL,
	enrollment_token_hash TEXT NOT NULL UNIQUE,
	last_heartbeat        BIGINT NOT NULL,
	gateway_key           TEXT NOT NULL,
	gateway_version       TEXT NOT NULL,
	gateway_started       BIGINT NOT NULL DEFAULT 0,
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
	created_at   BIGINT NOT NULL,
	seeded       BOOLEAN NOT NULL,
	FOREIGN KEY (cid, node_id) REFERENCES nodes(cid, nid)
);
CREATE INDEX services_installing ON services(state) WHERE state = 'installing';

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
	switch_ms       BIGINT NOT NULL,
	prepare_version BIGINT NOT NULL,
	started_at      BIGINT NOT NULL,
	switched_at     BIGINT NOT NULL,
	last_handshake  BIGINT NOT NULL,
	finished_at     BIGINT NOT NULL,
	steps           TEXT NOT NULL,
	seq             BIGSERIAL
);
CREATE INDEX moves_in_flight ON moves(service_id) WHERE state IN ('preparing', 'switching');

CREATE TABLE move_switched (
	move_id    TEXT NOT NULL REFERENCES moves(id) ON DELETE CASCADE,
	public_key TEXT NOT NULL,
	PRIMARY KEY (move_id, public_key)
);

CREATE TABLE sessions (
	id         TEXT PRIMARY KEY,
	token_hash TEXT NOT NULL UNIQUE,
	email      TEXT NOT NULL REFERENCES users(email) ON DELETE CASCADE,
	client_id  TEXT NOT NULL,
	state      TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	ended_at   BIGINT NOT NULL
);
CREATE INDEX sessions_live_expiry ON sessions(expires_at) WHERE state = 'live';
CREATE INDEX sessions_ended ON sessions(ended_at) WHERE state <> 'live';

CREATE TABLE devices (
	id         TEXT PRIMARY KEY,
	email      TEXT NOT NULL REFERENCES users(email) ON DELETE CASCADE,
	name       TEXT NOT NULL,
	os         TEXT NOT NULL,
	public_key TEXT NOT NULL UNIQUE,
	addr_index INTEGER NOT NULL UNIQUE,
	address    TEXT NOT NULL,
	session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
	created_at BIGINT NOT NULL,
	last_seen      BIGINT NOT NULL DEFAULT 0,
	last_handshake BIGINT NOT NULL DEFAULT 0,
	revoked_at     BIGINT NOT NULL DEFAULT 0,
	revoked_by     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX devices_session ON devices(session_id);
CREATE INDEX devices_user ON devices(lower(email));

CREATE TABLE memberships (
	device_id      TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
	cid            TEXT NOT NULL REFERENCES clusters(cid) ON DELETE CASCADE,
	last_handshake BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (device_id, cid)
);
CREATE INDEX memberships_cid ON memberships(cid, device_id);

CREATE TABLE oauth_codes (
	code_hash      TEXT PRIMARY KEY,
	client_id      TEXT NOT NULL,
	redirect_uri   TEXT NOT NULL,
	code_challenge TEXT NOT NULL,
	email          TEXT NOT NULL,
	expires_at     BIGINT NOT NULL
);
CREATE INDEX oauth_codes_expiry ON oauth_codes(expires_at);

CREATE TABLE oauth_device_codes (
	device_code_hash TEXT PRIMARY KEY,
	user_code        TEXT NOT NULL UNIQUE,
	client_id        TEXT NOT NULL,
	email            TEXT NOT NULL,
	approved         BOOLEAN NOT NULL,
	denied           BOOLEAN NOT NULL,
	expires_at       BIGINT NOT NULL,
	interval_ns      BIGINT NOT NULL,
	last_poll        BIGINT NOT NULL
);
CREATE INDEX oauth_device_codes_expiry ON oauth_device_codes(expires_at);

CREATE TABLE throttle (
	key        TEXT PRIMARY KEY,
	n          INTEGER NOT NULL,
	first      BIGINT NOT NULL,
	last       BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE INDEX throttle_expiry ON throttle(expires_at);

CREATE TABLE secrets (
	name  TEXT PRIMARY KEY,
	value BYTEA NOT NULL
);

CREATE TABLE revoked_keys (
	public_key TEXT PRIMARY KEY,
	device_id  TEXT NOT NULL,
	email      TEXT NOT NULL,
	revoked_at BIGINT NOT NULL,
	revoked_by TEXT NOT NULL
);

CREATE TABLE api_tokens (
	id         TEXT PRIMARY KEY,
	aid        TEXT NOT NULL REFERENCES accounts(aid) ON DELETE CASCADE,
	name       TEXT NOT NULL,
	token_hash TEXT NOT NULL UNIQUE,
	created_at BIGINT NOT NULL,
	created_by TEXT NOT NULL,
	expires_at BIGINT NOT NULL,
	last_used  BIGINT NOT NULL,
	revoked_at BIGINT NOT NULL,
	revoked_by TEXT NOT NULL,
	seq        BIGSERIAL
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens(aid, name) WHERE revoked_at = 0;
CREATE INDEX api_tokens_aid ON api_tokens(aid, created_at);

CREATE TABLE audit_log (
	id         BIGSERIAL PRIMARY KEY,
	at         BIGINT NOT NULL,
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
	entry_id BIGINT NOT NULL REFERENCES audit_log(id) ON DELETE CASCADE,
	PRIMARY KEY (aid, entry_id)
);
`,
	// 2: a VPN service's relay URL override (issue 14).
	2: `ALTER TABLE services ADD COLUMN relay_url TEXT NOT NULL DEFAULT '';`,
	// 3: what lies inside a cluster, as its gateways report it (issue 21).
	3: `
CREATE TABLE cluster_inside (
	cid    TEXT PRIMARY KEY REFERENCES clusters(cid) ON DELETE CASCADE,
	inside TEXT NOT NULL
);
`,
	// 4: access policies and groups (issue 23): the document in force per
	// account, the ones it replaced, and the account's groups of users.
	4: `
CREATE TABLE policies (
	aid      TEXT PRIMARY KEY REFERENCES accounts(aid) ON DELETE CASCADE,
	version  BIGINT NOT NULL,
	document TEXT NOT NULL,
	set_by   TEXT NOT NULL,
	set_at   BIGINT NOT NULL
);
CREATE TABLE policy_history (
	aid      TEXT NOT NULL REFERENCES accounts(aid) ON DELETE CASCADE,
	version  BIGINT NOT NULL,
	document TEXT NOT NULL,
	set_by   TEXT NOT NULL,
	set_at   BIGINT NOT NULL,
	PRIMARY KEY (aid, version)
);
CREATE TABLE user_groups (
	aid  TEXT NOT NULL REFERENCES accounts(aid) ON DELETE CASCADE,
	name TEXT NOT NULL,
	PRIMARY KEY (aid, name)
);
CREATE TABLE group_members (
	aid   TEXT NOT NULL,
	grp   TEXT NOT NULL,
	email TEXT NOT NULL,
	PRIMARY KEY (aid, grp, email),
	FOREIGN KEY (aid, grp) REFERENCES user_groups(aid, name) ON DELETE CASCADE
);
CREATE INDEX group_members_email ON group_members(aid, email);
`,
	// 5: operator is a role a user has in an account, not a flag of the
	// user (issue 22): today's operators keep it in every account they
	// belong to, and the flag goes.
	5: `
ALTER TABLE user_accounts ADD COLUMN operator BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE user_accounts ua SET operator = TRUE FROM users u WHERE u.email = ua.email AND u.operator;
ALTER TABLE users DROP COLUMN operator;
`,
	// 6: the identity provider's refresh token of each user who signed
	// in through it (issue 23), sealed by control, to ask the provider
	// about the user again while their sessions live.
	6: `
CREATE TABLE identity_grants (
	email        TEXT PRIMARY KEY,
	subject      TEXT NOT NULL,
	refresh      BYTEA NOT NULL,
	signed_in_at BIGINT NOT NULL
);
`,
}
