package oauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// typed is what the log says of a name typed into a sign-in form: never
// the text (people type their password into the email field), but a digest
// keyed with the login pages' secret, so that one address's attempts at
// one name can be followed through the log without the log holding what
// was typed, or a plain hash a dictionary would undo.
func (s *Server) typed(name string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("log\x00" + strings.ToLower(strings.TrimSpace(name))))
	return "h:" + hex.EncodeToString(m.Sum(nil)[:8])
}
