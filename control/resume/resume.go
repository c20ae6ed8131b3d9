// Package resume issues and checks stream resume tokens: what a device's
// map stream carries to the replica it reconnects to when its own replica
// dies, so that the survivor serves it from the token instead of reading
// its session, user and topic versions from the store again (issue 25:
// ~10 store round trips per device, 10,000 devices at once). A token names
// the device, the session and the user it was issued to, the hash of the
// bearer token it goes with (a token shown with another bearer is
// nothing), the version of the session's topic when the session was
// checked, when the session lapses, and when the token itself lapses.
// Control signs it with HMAC-SHA256 under a key derived from the secret
// every replica shares (the relay tickets' secret, with another label), so
// any replica checks what any replica issued, with nothing stored.
//
// It is not a session and does not outlive one: the replica that takes a
// token still refuses it when its hub has heard of a change of the session
// since the token was issued (an end, a revocation), and the stream it
// resumes follows the session's topic like any other, so a revocation
// still wins (control/server resume.go).
package resume

import (
	"errors"
	"fmt"
	"time"

	"github.com/runos/vpn/control/token"
)

// prefix names the format, so a resume token is never taken for another
// credential (a session token, a relay ticket).
const prefix = "rs1."

// Claims are what a token is good for.
type Claims struct {
	Device  string `json:"d"`
	Session string `json:"s"`
	User    string `json:"u"`
	// Hash is token.Hash of the session's bearer token.
	Hash string `json:"h"`
	// SesVer is the version of session:<id> the issuer's check saw.
	SesVer uint64 `json:"v"`
	// SessionExpires is when the session lapses; Expires when the token does.
	SessionExpires time.Time `json:"x"`
	Expires        time.Time `json:"e"`
}

// ErrExpired is wrapped by Check's refusal of a lapsed token.
var ErrExpired = errors.New("the resume token expired")

// Signer issues and checks tokens under one key.
type Signer struct{ signed *token.Signed }

// New returns a Signer keyed by secret (at least 16 bytes).
func New(secret []byte) (*Signer, error) {
	s, err := token.NewSigned(secret, "runos stream resume key", prefix, "resume token")
	if err != nil {
		return nil, err
	}
	return &Signer{signed: s}, nil
}

// Issue returns the token of c.
func (s *Signer) Issue(c Claims) string {
	c.Expires = c.Expires.UTC().Truncate(time.Second)
	c.SessionExpires = c.SessionExpires.UTC()
	return s.signed.Issue(c)
}

// Check returns the claims of tok if control signed it and neither it nor
// its session has lapsed at now.
func (s *Signer) Check(tok string, now time.Time) (Claims, error) {
	var c Claims
	if err := s.signed.Open(tok, &c); err != nil {
		return Claims{}, err
	}
	if c.Device == "" || c.Session == "" || c.User == "" || c.Hash == "" {
		return Claims{}, errors.New("the resume token is malformed")
	}
	if !now.Before(c.Expires) {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, c.Expires.Format(time.RFC3339))
	}
	if !now.Before(c.SessionExpires) {
		return Claims{}, fmt.Errorf("%w: its session lapsed at %s", ErrExpired, c.SessionExpires.Format(time.RFC3339))
	}
	return c, nil
}
