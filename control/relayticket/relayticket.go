// Package relayticket issues and checks relay tickets: the short-lived
// credential a device shows the relay of the node serving a cluster's VPN,
// instead of its session token (which is a full API credential, and which
// the relay and the node's ingress would otherwise see). A ticket names
// the device, the session it was issued under, the cluster and the node,
// and when it lapses; control signs it with HMAC-SHA256 under a secret
// every replica shares, so whichever replica a gateway asks can check a
// ticket any replica issued, with nothing stored.
//
// It is not a session: control still checks, on every relay-check, that
// the session is live and the device its own (control/server relay.go).
package relayticket

import (
	"errors"
	"fmt"
	"time"

	"github.com/runos/vpn/control/token"
)

// Claims are what a ticket is good for.
type Claims struct {
	Device  string    `json:"d"`
	Session string    `json:"s"`
	CID     string    `json:"c"`
	NID     string    `json:"n"`
	Expires time.Time `json:"e"`
}

// prefix names the format, so that a ticket is never taken for a token.
const prefix = "rt1."

// ErrExpired is wrapped by Check's refusal of a lapsed ticket.
var ErrExpired = errors.New("the relay ticket expired")

// Signer issues and checks tickets under one secret.
type Signer struct{ signed *token.Signed }

// New returns a Signer keyed by secret (at least 16 bytes).
func New(secret []byte) (*Signer, error) {
	s, err := token.NewSigned(secret, "runos relay ticket key", prefix, "relay ticket")
	if err != nil {
		return nil, err
	}
	return &Signer{signed: s}, nil
}

// Issue returns the ticket of c.
func (s *Signer) Issue(c Claims) string {
	c.Expires = c.Expires.UTC().Truncate(time.Second)
	return s.signed.Issue(c)
}

// Check returns the claims of ticket if control signed it and it has not
// lapsed at now.
func (s *Signer) Check(ticket string, now time.Time) (Claims, error) {
	var c Claims
	if err := s.signed.Open(ticket, &c); err != nil {
		return Claims{}, err
	}
	if c.Device == "" || c.Session == "" || c.CID == "" || c.NID == "" {
		return Claims{}, errors.New("the relay ticket is malformed")
	}
	if !now.Before(c.Expires) {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, c.Expires.Format(time.RFC3339))
	}
	return c, nil
}
