// Package oauth is runos-control's OAuth 2.0 authorization server: the
// authorization-code grant with PKCE S256 for loopback redirect URIs only
// (RFC 7636, RFC 8252), the device-authorization grant (RFC 8628), the HTML
// login page, per-user and per-address slow-down of wrong passwords, and
// the token endpoint issuing 24-hour access tokens.
//
// It owns no accounts or sessions: a Backend checks passwords and creates
// sessions; a GrantStore keeps pending authorization codes and device codes
// so that several control replicas can share them.
package oauth

import (
	"context"
	"errors"
	"time"
)

// Backend is the part of control the authorization server relies on.
type Backend interface {
	// CheckPassword reports whether password is the user's. It returns
	// ok=false, err=nil for an unknown user or a wrong password.
	CheckPassword(ctx context.Context, email, password string) (ok bool, err error)
	// CreateSession starts a session for the user and returns its opaque
	// access token (stored hashed by the backend) and when it expires.
	// grant names the authorization code it is issued from (its hash; ""
	// for a device sign-in), for RevokeGrant.
	CreateSession(ctx context.Context, email, clientID, grant string) (token string, expiresAt time.Time, err error)
	// RevokeGrant ends the session issued from grant, if one is live: an
	// authorization code presented again after its first use may have been
	// stolen, and RFC 6749 §4.1.2 says the tokens issued from it should be
	// revoked. It reports whether a session was ended.
	RevokeGrant(ctx context.Context, grant string) (revoked bool, err error)
}

// AuthCode is a pending authorization code (stored under the SHA-256 of the code).
type AuthCode struct {
	CodeHash      string
	ClientID      string
	RedirectURI   string
	CodeChallenge string // S256
	User          string
	ExpiresAt     time.Time
}

// DeviceCode is a pending device authorization (RFC 8628).
type DeviceCode struct {
	DeviceCodeHash string
	UserCode       string // e.g. WDJB-MJHT, what the user types
	ClientID       string
	User           string // set once the user approved it
	Approved       bool
	Denied         bool
	ExpiresAt      time.Time
	Interval       time.Duration // minimum between token polls
	LastPoll       time.Time
}

// ErrNotFound is returned by a GrantStore for a missing (or consumed) entry.
var ErrNotFound = errors.New("oauth: not found")

// ErrTooMany is returned by PutDeviceCode when the cap of pending device
// codes is reached.
var ErrTooMany = errors.New("oauth: too many pending device sign-ins")

// GrantStore keeps pending grants and the slow-down counters, shared by
// every control replica. TakeAuthCode must be atomic: a code is returned
// once, then gone, so that a replayed code is refused.
type GrantStore interface {
	PutAuthCode(ctx context.Context, c AuthCode) error
	TakeAuthCode(ctx context.Context, codeHash string) (AuthCode, error)

	// PutDeviceCode stores a new device code unless maxPending codes that
	// have not expired at now are pending already (ErrTooMany). Expired
	// codes are deleted, and do not count.
	PutDeviceCode(ctx context.Context, d DeviceCode, now time.Time, maxPending int) error
	DeviceCodeByUserCode(ctx context.Context, userCode string) (DeviceCode, error)
	DeviceCodeByHash(ctx context.Context, deviceCodeHash string) (DeviceCode, error)
	// DecideDeviceCode records the user's answer (approve for user, or
	// deny) in one conditional update, only while the code is undecided and
	// has not expired at now; ErrNotFound otherwise. It returns the code as
	// decided.
	DecideDeviceCode(ctx context.Context, userCode, user string, approve bool, now time.Time) (DeviceCode, error)
	// PollDeviceCode records a token poll in one step: poll is given the
	// code as stored and returns its new LastPoll and Interval, which alone
	// are written, so that a poll never overwrites a decision made
	// meanwhile. It returns the code as updated (ErrNotFound if gone).
	PollDeviceCode(ctx context.Context, deviceCodeHash string, poll func(DeviceCode) (time.Time, time.Duration)) (DeviceCode, error)
	// DeleteDeviceCode removes the entry, returning ErrNotFound if it was
	// already gone: the server redeems an approval only after a delete that
	// succeeded, so that two racing polls cannot both get a session.
	DeleteDeviceCode(ctx context.Context, deviceCodeHash string) error

	// Count updates the counters of keys (throttle.go) in one step that no
	// other Count of any of them interleaves with, whichever replica runs
	// it: fn is given their values (the zero Counter for a key not counted,
	// or expired at now) and returns the new ones, in the same order. A
	// counter is kept until its Expires; a zero Expires deletes it.
	Count(ctx context.Context, now time.Time, keys []string, fn func([]Counter) []Counter) error
}

// Counter counts attempts of one kind for one key (a user, a source
// address): N of them, the last at Last, until Expires.
type Counter struct {
	N       int
	First   time.Time // the first counted, for windows
	Last    time.Time
	Expires time.Time
}
