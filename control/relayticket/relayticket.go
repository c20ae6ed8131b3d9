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
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// prefix names the format, so that a ticket is never taken for a token.
const prefix = "rt1."

// Claims are what a ticket is good for.
type Claims struct {
	Device  string    `json:"d"`
	Session string    `json:"s"`
	CID     string    `json:"c"`
	NID     string    `json:"n"`
	Expires time.Time `json:"e"`
}

// ErrExpired is wrapped by Check's refusal of a lapsed ticket.
var ErrExpired = errors.New("the relay ticket expired")

// Signer issues and checks tickets under one secret.
type Signer struct{ key []byte }

// New returns a Signer keyed by secret (at least 16 bytes).
func New(secret []byte) (*Signer, error) {
	if len(secret) < 16 {
		return nil, errors.New("relay tickets: the secret must hold at least 16 bytes")
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("runos relay ticket key"))
	return &Signer{key: m.Sum(nil)}, nil
}

// Issue returns the ticket of c.
func (s *Signer) Issue(c Claims) string {
	c.Expires = c.Expires.UTC().Truncate(time.Second)
	body, _ := json.Marshal(c) // strings and a time: never fails
	p := base64.RawURLEncoding.EncodeToString(body)
	return prefix + p + "." + base64.RawURLEncoding.EncodeToString(s.mac(p))
}

// Check returns the claims of ticket if control signed it and it has not
// lapsed at now.
func (s *Signer) Check(ticket string, now time.Time) (Claims, error) {
	rest, ok := strings.CutPrefix(ticket, prefix)
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || len(ticket) > 2048 {
		return Claims{}, errors.New("not a relay ticket")
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(p)) {
		return Claims{}, errors.New("the relay ticket is not one control signed")
	}
	body, err := base64.RawURLEncoding.DecodeString(p)
	var c Claims
	if err == nil {
		err = json.Unmarshal(body, &c)
	}
	if err != nil || c.Device == "" || c.Session == "" || c.CID == "" || c.NID == "" {
		return Claims{}, errors.New("the relay ticket is malformed")
	}
	if !now.Before(c.Expires) {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, c.Expires.Format(time.RFC3339))
	}
	return c, nil
}

func (s *Signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}
