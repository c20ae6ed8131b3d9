package store

import (
	"time"

	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/model"
)

// DeviceFilter selects devices. Empty fields select everything.
type DeviceFilter struct {
	AIDs []string // devices of users who belong to one of these accounts (required: nil selects none)
	User string   // one user's devices, by email (any case)
	CID  string   // devices joined to this cluster
}

// AuditFilter selects audit entries, newest first.
type AuditFilter struct {
	AIDs   []string // entries seen by one of these accounts (required: nil selects none)
	CID    string
	Actor  string // the actor's name (an email, a token's name, "control")
	Kind   string // a kind, or the part before its dot ("device")
	Target string // exactly this target
	Before int64  // only entries with a smaller id (the next page); 0: from the newest
	Limit  int    // at most this many; 0: DefaultAuditLimit
}

// DefaultAuditLimit is how many entries a page of the audit log holds
// when its reader does not say.
const DefaultAuditLimit = 50

// AccessReader reads devices, sessions, operator tokens and the audit log
// for the operators' views (who is on the VPN, and how to throw them off).
type AccessReader interface {
	// Devices lists the devices f selects, by id.
	Devices(f DeviceFilter) ([]model.Device, error)
	// Memberships lists the clusters a device joined, by cid.
	Memberships(deviceID string) ([]model.Membership, error)
	// CountUserDevices counts a user's devices, revoked ones included
	// (each holds an address until it is deleted).
	CountUserDevices(email string) (int, error)
	// KeyRevoked returns the revocation of a public key; ErrNotFound when
	// the key was never revoked.
	KeyRevoked(publicKey string) (model.RevokedKey, error)
	// IdleDevices lists devices with no live session at now whose
	// LastActive is at or before cutoff, oldest first, at most limit.
	IdleDevices(cutoff, now time.Time, limit int) ([]model.Device, error)
	// NextIdle is the oldest LastActive of a device with no live session
	// at now (ok=false: none).
	NextIdle(now time.Time) (t time.Time, ok bool, err error)

	// LiveSessionsOfUser lists a user's sessions live at now, by creation.
	LiveSessionsOfUser(email string, now time.Time) ([]model.Session, error)

	APIToken(id string) (model.APIToken, error)
	APITokenByHash(hash string) (model.APIToken, error)
	// APITokens lists an account's tokens, revoked ones too, by creation.
	APITokens(aid string) ([]model.APIToken, error)

	// AuditEntries lists the entries f selects, newest first.
	AuditEntries(f AuditFilter) ([]audit.Entry, error)

	// LatestMove is the newest move of a service, in flight or not
	// (ErrNotFound: never moved), for the console's progress.
	LatestMove(serviceID string) (model.Move, error)
}

// AccessWriter changes them.
type AccessWriter interface {
	// DeleteDevice deletes a device with its memberships, freeing its address.
	DeleteDevice(id string) error
	// SetDeviceSeen records that control heard from the device at t.
	SetDeviceSeen(id string, t time.Time) error
	// SetHandshake records a handshake of the device with cid's gateway at
	// t when it is newer than the one recorded; false when it was not.
	SetHandshake(deviceID, cid string, t time.Time) (bool, error)
	// PutRevokedKey refuses a public key from then on (ErrExists if it already is).
	PutRevokedKey(model.RevokedKey) error

	PutAPIToken(model.APIToken) error // ErrExists for a taken id, hash, or live name of the account
	UpdateAPIToken(model.APIToken) error

	// PutAuditEntry appends an entry and returns its id (audit.Record calls it).
	PutAuditEntry(audit.Entry) (int64, error)
}
