package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/runos/vpn/control/reqid"
	"github.com/runos/vpn/control/token"
	"github.com/runos/vpn/internal/httpjson"
)

// Grant types of the token endpoint.
const (
	grantAuthorizationCode = "authorization_code"
	grantDeviceCode        = "urn:ietf:params:oauth:grant-type:device_code"
)

// tokenError is an error response of the token endpoint (RFC 6749 §5.2,
// RFC 8628 §3.5).
type tokenError struct {
	status int
	code   string
	desc   string
}

func (e *tokenError) Error() string { return e.code + ": " + e.desc }

func badRequest(code, desc string) *tokenError {
	return &tokenError{status: http.StatusBadRequest, code: code, desc: desc}
}

func errInvalidClient(desc string) *tokenError {
	return &tokenError{status: http.StatusUnauthorized, code: "invalid_client", desc: desc}
}

// internal logs a failure inside control with the request's id
// (control/reqid) and returns the id: the caller is told the id, never the
// failure's text.
func (s *Server) internal(r *http.Request, what string, err error, attrs ...any) string {
	id := reqid.From(r.Context())
	s.log.Error("oauth: "+what, append([]any{"requestId", id, "err", err}, attrs...)...)
	return id
}

// serverError is the token endpoint's answer to a failure inside control.
func (s *Server) serverError(r *http.Request, what string, err error, attrs ...any) *tokenError {
	id := s.internal(r, what, err, attrs...)
	return &tokenError{status: http.StatusInternalServerError, code: "server_error",
		desc: "the sign-in could not be completed (request " + id + "); try again"}
}

// writeJSON answers as JSON, with the Pragma: no-cache of RFC 6749 §5.1
// for caches older than Cache-Control.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Pragma", "no-cache")
	_ = httpjson.Write(w, status, v) // maps of strings and numbers: they encode
}

func writeTokenError(w http.ResponseWriter, e *tokenError) {
	if e.status == http.StatusUnauthorized {
		// RFC 6749 §5.2: a 401 names the scheme the client could have used.
		w.Header().Set("WWW-Authenticate", `Basic realm="runos"`)
	}
	writeJSON(w, e.status, map[string]string{"error": e.code, "error_description": e.desc})
}

// clientOf returns the public client making a token or device request:
// client_id in the body (RFC 6749 §2.3.1 for clients without a secret), or
// HTTP Basic with an empty password as some libraries send it.
func clientOf(r *http.Request, p params) (string, *tokenError) {
	id := p["client_id"]
	if hid, secret, ok := r.BasicAuth(); ok {
		if secret != "" {
			return "", errInvalidClient("RunOS apps are public clients and have no secret")
		}
		if id != "" && id != hid {
			return "", badRequest("invalid_request", "client_id differs between the Authorization header and the body")
		}
		id = hid
	}
	if p["client_secret"] != "" {
		return "", errInvalidClient("RunOS apps are public clients and have no secret")
	}
	if id == "" {
		return "", errInvalidClient("client_id is missing")
	}
	if _, ok := clients[id]; !ok {
		return "", errInvalidClient("unknown client " + id)
	}
	return id, nil
}

// token is POST /oauth/token.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeTokenError(w, &tokenError{status: http.StatusMethodNotAllowed, code: "invalid_request", desc: "use POST"})
		return
	}
	tok, exp, terr := s.grant(r, w)
	if terr != nil {
		if terr.status < 500 && terr.code != "authorization_pending" && terr.code != "slow_down" {
			s.cfg.Metrics.Refused(terr.code) // an OAuth error code: a fixed set
		}
		if terr.status < 500 { // failures were logged with the request id
			s.log.Debug("oauth: token request refused", "err", terr, "addr", r.RemoteAddr)
		}
		writeTokenError(w, terr)
		return
	}
	secs := int64(math.Ceil(exp.Sub(s.now()).Seconds()))
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok,
		"token_type":   "Bearer",
		"expires_in":   max(secs, 1),
	})
}

func (s *Server) grant(r *http.Request, w http.ResponseWriter) (string, time.Time, *tokenError) {
	p, err := readForm(w, r)
	if err != nil {
		return "", time.Time{}, badRequest("invalid_request", err.Error())
	}
	client, terr := clientOf(r, p)
	if terr != nil {
		return "", time.Time{}, terr
	}
	switch gt := p["grant_type"]; gt {
	case grantAuthorizationCode:
		return s.counted("authorization_code")(s.grantCode(r, p, client))
	case grantDeviceCode:
		return s.counted("device_code")(s.grantDevice(r, p, client))
	case "":
		return "", time.Time{}, badRequest("invalid_request", "grant_type is missing")
	default:
		return "", time.Time{}, badRequest("unsupported_grant_type", "grant_type must be authorization_code or "+grantDeviceCode)
	}
}

// counted counts a session issued through grant.
func (s *Server) counted(grant string) func(string, time.Time, *tokenError) (string, time.Time, *tokenError) {
	return func(tok string, exp time.Time, terr *tokenError) (string, time.Time, *tokenError) {
		if terr == nil {
			s.cfg.Metrics.SignedIn(grant)
		}
		return tok, exp, terr
	}
}

// grantCode redeems an authorization code (RFC 6749 §4.1.3, RFC 7636 §4.6).
func (s *Server) grantCode(r *http.Request, p params, client string) (string, time.Time, *tokenError) {
	code, redirect, verifier := p["code"], p["redirect_uri"], p["code_verifier"]
	switch {
	case code == "":
		return "", time.Time{}, badRequest("invalid_request", "code is missing")
	case redirect == "":
		return "", time.Time{}, badRequest("invalid_request", "redirect_uri is missing")
	case verifier == "":
		return "", time.Time{}, badRequest("invalid_request", "code_verifier is missing (PKCE is required)")
	}
	// Taking the code consumes it whatever happens next: one who presents
	// it with the wrong verifier or redirect URI must not get a second try.
	grant := token.Hash(code)
	ac, err := s.cfg.Store.TakeAuthCode(r.Context(), grant)
	if errors.Is(err, ErrNotFound) {
		// Unknown, or used already: then whoever holds it now may have
		// stolen it, so the session of its first use ends too (RFC 6749
		// §4.1.2). An unknown code finds no session.
		if revoked, err := s.cfg.Backend.RevokeGrant(r.Context(), grant); err != nil {
			return "", time.Time{}, s.serverError(r, "revoke the session of a replayed code", err)
		} else if revoked {
			s.log.Warn("oauth: an authorization code was used twice: ended the session issued from it", "client", client, "addr", r.RemoteAddr)
		}
		return "", time.Time{}, badRequest("invalid_grant", "the code is unknown or was already used; sign in again")
	}
	if err != nil {
		return "", time.Time{}, s.serverError(r, "take authorization code", err)
	}
	switch {
	case !s.now().Before(ac.ExpiresAt):
		return "", time.Time{}, badRequest("invalid_grant", "the code expired; sign in again")
	case ac.ClientID != client:
		return "", time.Time{}, badRequest("invalid_grant", "the code was issued to another client")
	case ac.RedirectURI != redirect:
		return "", time.Time{}, badRequest("invalid_grant", "redirect_uri does not match the authorization request")
	case !verifierMatches(verifier, ac.CodeChallenge):
		return "", time.Time{}, badRequest("invalid_grant", "code_verifier does not match the code_challenge")
	}
	return s.startSession(r, ac.User, client, grant)
}

// verifierMatches checks RFC 7636 §4.6 for S256, refusing verifiers that
// are not 43 to 128 unreserved characters (§4.1).
func verifierMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	for i := 0; i < len(verifier); i++ {
		c := verifier[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

func (s *Server) startSession(r *http.Request, user, client, grant string) (string, time.Time, *tokenError) {
	tok, exp, err := s.cfg.Backend.CreateSession(r.Context(), user, client, grant)
	if err != nil {
		return "", time.Time{}, s.serverError(r, "create session", err, "user", user)
	}
	s.log.Info("oauth: session started", "user", user, "client", client, "expires", exp)
	return tok, exp, nil
}
