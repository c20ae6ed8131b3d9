package model

import "time"

// Session states besides live, ended and expired (model.go).
const (
	// SessionRevoked: its device was revoked or removed; the device's
	// daemon is told so (401 device_revoked) rather than "signed out".
	SessionRevoked = "revoked"
)

// Revoked reports whether the device was revoked: its session ended and
// its key is refused from then on.
func (d Device) Revoked() bool { return !d.RevokedAt.IsZero() }

// LastActive is the newest sign of life of the device: registered, seen by
// control, a handshake with a gateway, revoked. A device without a live
// session whose LastActive is older than --device-idle-ttl is deleted.
func (d Device) LastActive() time.Time {
	t := d.CreatedAt
	for _, u := range []time.Time{d.LastSeen, d.LastHandshake, d.RevokedAt} {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// Membership is a device joined to a cluster, with the newest handshake
// the cluster's gateways reported for it.
type Membership struct {
	CID           string
	LastHandshake time.Time // zero: none reported
}

// RevokedKey is a device public key control refuses from then on: a
// revoked device must sign in again and register a new key.
type RevokedKey struct {
	PublicKey string
	DeviceID  string
	User      string
	RevokedAt time.Time
	RevokedBy string // the actor, as the audit log names it
}

// APIToken is an operator API token of an account. Only its hash is kept;
// the secret is shown once, when it is created.
type APIToken struct {
	ID        string
	AID       string
	Name      string
	Hash      string // hex SHA-256
	CreatedAt time.Time
	CreatedBy string
	ExpiresAt time.Time // zero: never (the world file's token, unless it says)
	LastUsed  time.Time
	RevokedAt time.Time
	RevokedBy string
}

// Expired reports whether the token has expired at now.
func (t APIToken) Expired(now time.Time) bool {
	return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)
}

// Policy is an account's access policy document as it was set (comments
// and all): control/policy reads it; the store keeps it.
type Policy struct {
	AID      string
	Version  uint64 // the document's own version line
	Document string
	SetBy    string // who set it, as the audit log names the actor
	SetAt    time.Time
}

// Group is one of an account's groups of users (`runos groups`), with its
// members' emails (lowercase), sorted.
type Group struct {
	AID     string
	Name    string
	Members []string
}

// SessionDisowned: the identity provider the user signed in through no
// longer accepts the sign-in (the user was removed or disabled there);
// the daemon is told so rather than "signed out".
const SessionDisowned = "disowned"

// SessionRemoved: an operator removed the user from their account
// (`runos users remove`); the daemon is told so rather than "signed out".
const SessionRemoved = "removed"

// IdentityGrant is what control keeps of a user's last sign-in through the
// identity provider, to ask the provider about the user again: the
// provider's subject and its refresh token, sealed (never kept in clear;
// "" sealed when the provider issued none).
type IdentityGrant struct {
	Email         string
	Subject       string
	SealedRefresh []byte
	SignedInAt    time.Time
}
