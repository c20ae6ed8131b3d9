package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Signed issues and opens credentials that carry their own claims:
// "<prefix><base64url JSON>.<base64url HMAC-SHA256>", keyed from a secret
// every replica shares, so any replica checks what any other issued with
// nothing stored (relay tickets, stream resume tokens). The prefix names
// the kind, so one kind is never taken for another or for a bearer token.
type Signed struct {
	prefix, what string
	key          []byte
}

// maxSigned bounds what Open reads: such a credential is a few hundred bytes.
const maxSigned = 2048

// NewSigned keys a kind of signed credential: label separates its key from
// every other kind's made from the same secret (at least 16 bytes); what
// names it in errors ("relay ticket").
func NewSigned(secret []byte, label, prefix, what string) (*Signed, error) {
	if len(secret) < 16 {
		return nil, fmt.Errorf("%ss: the secret must hold at least 16 bytes", what)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return &Signed{prefix: prefix, what: what, key: m.Sum(nil)}, nil
}

// Issue returns the credential carrying claims (a JSON-encodable value).
func (s *Signed) Issue(claims any) string {
	body, err := json.Marshal(claims)
	if err != nil {
		panic(fmt.Sprintf("%s claims: %v", s.what, err)) // a programming error: claims are plain values
	}
	p := base64.RawURLEncoding.EncodeToString(body)
	return s.prefix + p + "." + base64.RawURLEncoding.EncodeToString(s.mac(p))
}

// Open checks that tok is of this kind and was signed with this key, and
// decodes its claims into claims.
func (s *Signed) Open(tok string, claims any) error {
	rest, ok := strings.CutPrefix(tok, s.prefix)
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || len(tok) > maxSigned {
		return fmt.Errorf("not a %s", s.what)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(p)) {
		return fmt.Errorf("the %s is not one control signed", s.what)
	}
	body, err := base64.RawURLEncoding.DecodeString(p)
	if err == nil {
		err = json.Unmarshal(body, claims)
	}
	if err != nil {
		return errors.New("the " + s.what + " is malformed")
	}
	return nil
}

func (s *Signed) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}
