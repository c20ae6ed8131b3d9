// Package token makes the bearer tokens control hands out (access tokens of
// sign-ins) and hashes every kind of token for storage: 32 random bytes,
// base64url without padding; stored as hex SHA-256 (docs/internals.md
// "Tokens"), so a leaked database holds no usable credential.
package token

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// New returns a fresh token.
func New() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// Hash is the hex SHA-256 under which a token is stored and looked up.
func Hash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// ID returns a short random identifier with a prefix, e.g. "mv-3fa9c2d1e0b4".
func ID(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// IDFor returns the identifier of the same shape as ID that belongs to
// seed: a record made from something secret and single-use (a session
// from an authorization code's hash) can be found again from it without
// a lookup table, and the id tells nothing of the seed.
func IDFor(prefix, seed string) string {
	h := sha256.Sum256([]byte("runos id " + prefix + " " + seed))
	return prefix + "-" + hex.EncodeToString(h[:6])
}
