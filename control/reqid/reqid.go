// Package reqid gives every request to runos-control an id, sent back in
// the X-Request-Id header and kept in the request's context, so that a
// failure inside control is logged with the id and the caller is told the
// id alone: the internal error's text (SQL, file paths, a driver's words)
// never reaches a caller, signed in or not, and an operator who is handed
// the id finds the whole story in the log. It is not a tracing system: an
// id a client sends is ignored, since it could be chosen to confuse the log.
package reqid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// Header carries the id in every answer.
const Header = "X-Request-Id"

type key struct{}

// New returns a fresh id: 8 random bytes in hex.
func New() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Handler gives each request an id (keeping one an outer Handler already
// gave) before next sees it.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if From(r.Context()) == "" {
			id := New()
			w.Header()[Header] = []string{id}
			r = r.WithContext(context.WithValue(r.Context(), key{}, id))
		}
		next.ServeHTTP(w, r)
	})
}

// From is the request's id ("" outside Handler).
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}
