package api

import "time"

// Who is on the VPN, and how to throw them off: the devices, sessions,
// operator API tokens and audit log operators manage (issue 12).
//
//	GET    /v1/devices[?cid=&user=&aid=]          operator: the account's devices
//	GET    /v1/devices/{id}                        operator, or the device's user
//	POST   /v1/devices/{id}/revoke                 operator: end its session, refuse its key
//	DELETE /v1/devices/{id}                        operator: delete a revoked or signed-out device
//	GET    /v1/me/devices                          a user's own devices
//	DELETE /v1/me/devices/{id}                     a user removes their own device (revoked and deleted)
//	GET    /v1/sessions?user=EMAIL[&aid=]          operator: a user's live sessions
//	DELETE /v1/sessions/{id}                       operator: end one session
//	DELETE /v1/sessions?user=EMAIL[&aid=]          operator: end all of a user's sessions
//	POST   /v1/tokens                              operator (signed in, the role): CreateTokenRequest → CreatedToken
//	GET    /v1/tokens[?aid=]                       operator, or manage-tokens
//	DELETE /v1/tokens/{idOrName}[?aid=]            operator, or manage-tokens
//	GET    /v1/audit[?aid=&cid=&actor=&kind=&limit=&before=]   operator, or read-audit: AuditPage
//
// "operator" is the operator role in an account (Me.Operates) or the
// account's token; "manage-tokens", "read-audit": a signed-in user of the
// account whom an `operate … -> *:` rule of its policy grants it (Me.May;
// 403 names the rule, 404 for an account not theirs). No rule lets a user
// create a token: a token carries every operator verb and outlives the
// rule. Of a user who also belongs to accounts the caller does
// not operate, the device and session routes reach only the devices that
// joined a cluster of the caller's accounts (and the sessions holding
// one), showing only those clusters; anything else is 404.

// Error codes of these routes (and of authentication).
const (
	CodeDeviceRevoked = "device_revoked" // the device was revoked or removed: sign in again, with a new key (401, 403 on register)
	CodeTokenRevoked  = "token_revoked"  // the operator token was revoked (401)
	CodeTokenExpired  = "token_expired"  // the operator token expired (401)
	CodeDeviceLimit   = "device_limit"   // the user has as many devices as one may have (409)
)

// Device states in DeviceDetail.
const (
	DeviceActive    = "active"     // its session is live
	DeviceSignedOut = "signed-out" // no live session: idle until it signs in again
	DeviceRevoked   = "revoked"    // its session ended and its key is refused
)

// DeviceCluster is a cluster a device joined, with the newest handshake
// the cluster's gateway reported for it.
type DeviceCluster struct {
	CID           string    `json:"cid"`
	LastHandshake time.Time `json:"lastHandshake,omitzero"`
}

// DeviceDetail is a device as an operator (or its user) sees it.
type DeviceDetail struct {
	Device
	State            string          `json:"state"` // active, signed-out or revoked
	CreatedAt        time.Time       `json:"createdAt"`
	LastSeen         time.Time       `json:"lastSeen,omitzero"`      // control last heard from it
	LastHandshake    time.Time       `json:"lastHandshake,omitzero"` // newest over its clusters
	SessionID        string          `json:"sessionId,omitempty"`
	SessionExpiresAt time.Time       `json:"sessionExpiresAt,omitzero"` // while the session is live
	RevokedAt        time.Time       `json:"revokedAt,omitzero"`
	RevokedBy        string          `json:"revokedBy,omitempty"`
	Clusters         []DeviceCluster `json:"clusters"`
}

// Session is a live sign-in of a user (GET /v1/sessions).
type Session struct {
	ID        string    `json:"id"`
	User      string    `json:"user"`
	Client    string    `json:"client"` // runos-cli, runos-desktop, runos-console
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	Devices   []string  `json:"devices"` // ids of the devices bound to it
}

// EndedSessions is what ending sessions did.
type EndedSessions struct {
	Ended   []string `json:"ended"`   // session ids
	Devices []string `json:"devices"` // the devices that dropped off every gateway with them
	// Cut are sessions not ended because a device of theirs is also in a
	// cluster of an account the caller does not operate: their devices
	// left the caller's clusters instead (listed in Devices).
	Cut []string `json:"cut,omitempty"`
}

// Token states.
const (
	TokenActive  = "active"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

// DefaultTokenTTL is how long an operator token lasts unless asked
// otherwise; MaxTokenTTL the longest it may.
const (
	DefaultTokenTTL = 90 * 24 * time.Hour
	MaxTokenTTL     = 366 * 24 * time.Hour
)

// APIToken is an operator API token, never with its secret.
type APIToken struct {
	ID        string    `json:"id"`
	AID       string    `json:"aid"`
	Name      string    `json:"name"`
	State     string    `json:"state"` // active, expired or revoked
	CreatedAt time.Time `json:"createdAt,omitzero"`
	CreatedBy string    `json:"createdBy"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"` // absent: never (the world file's, unless it says)
	LastUsed  time.Time `json:"lastUsed,omitzero"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	RevokedBy string    `json:"revokedBy,omitempty"`
}

// CreateTokenRequest is POST /v1/tokens.
type CreateTokenRequest struct {
	Name string `json:"name"`
	AID  string `json:"aid,omitempty"` // needed when the caller operates several accounts
	// ExpiresInSeconds: 0 means DefaultTokenTTL; at most MaxTokenTTL.
	ExpiresInSeconds int64 `json:"expiresInSeconds,omitempty"`
}

// CreatedToken is the answer of POST /v1/tokens: the only time the
// secret is shown.
type CreatedToken struct {
	APIToken
	Token string `json:"token"`
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`     // an email, a token's name, or "control"
	ActorKind string    `json:"actorKind"` // user, token or control
	Source    string    `json:"source,omitempty"`
	Kind      string    `json:"kind"` // e.g. device.revoked
	CID       string    `json:"cid,omitempty"`
	Target    string    `json:"target"`
	Outcome   string    `json:"outcome"`
}

// AuditPage is GET /v1/audit: entries newest first; Next, when not 0, is
// the ?before= of the next (older) page.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    int64        `json:"next,omitempty"`
}

// AuditQuery selects audit entries (the query parameters of GET /v1/audit).
type AuditQuery struct {
	AID    string
	CID    string
	Actor  string
	Kind   string
	Limit  int   // 0: 50; at most 500
	Before int64 // the Next of the previous page
}

// PoolUsage is how full the device pool is (ClusterDetail, for operators).
type PoolUsage struct {
	Prefix  string `json:"prefix"`
	Size    int    `json:"size"` // addresses devices can get
	Used    int    `json:"used"`
	Warning string `json:"warning,omitempty"` // set once it is nearly full
}

// DeviceQuery selects devices (the query parameters of GET /v1/devices).
type DeviceQuery struct {
	AID  string
	CID  string
	User string
}
