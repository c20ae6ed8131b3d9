package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/lru"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/token"
)

// Kinds of caller (api's package doc).
const (
	kindUser     = "user"     // the access token of a sign-in
	kindOperator = "operator" // an account's operator API token
	kindGateway  = "gateway"  // a node's enrollment token
)

// principal is who a request's bearer token belongs to.
type principal struct {
	hash    string // of the bearer token: how a long-poll checks the caller again
	kind    string
	user    model.User     // kindUser
	session model.Session  // kindUser
	sesVer  uint64         // version of session:<id> when read
	aid     string         // kindOperator
	token   model.APIToken // kindOperator
	node    model.Node     // kindGateway

	// kindUser: session:<id>, and api.SessionInfo encoded for device
	// maps, made once per sign-in rather than on every long-poll wake.
	sesTopic *hub.Topic
	sesJSON  json.RawMessage
	// resumed: taken from a stream's resume token, not the store (resume.go).
	resumed   bool
	resumeExp time.Time // when the resume token it came from lapses: a token issued to it lapses no later
}

// actor is who the audit log says made a change.
func (p *principal) actor() audit.Actor {
	if p.kind == kindOperator {
		return audit.Token(p.token.Name)
	}
	return audit.User(p.user.Email)
}

// canSee reports whether the caller may see the account's clusters.
func (p *principal) canSee(aid string) bool {
	switch p.kind {
	case kindUser:
		return p.user.InAccount(aid)
	case kindOperator:
		return p.aid == aid
	}
	return false
}

// canOperate reports whether the caller may use the operator verbs there:
// a user with the operator role in that account (a role per account, not
// per user: an operator of one account is a plain user of the others), or
// the account's own token.
func (p *principal) canOperate(aid string) bool {
	switch p.kind {
	case kindUser:
		return p.user.OperatorOf(aid)
	case kindOperator:
		return p.aid == aid
	}
	return false
}

func (p *principal) accounts() []string {
	if p.kind == kindOperator {
		return []string{p.aid}
	}
	return p.user.Accounts
}

// operated are the accounts where the caller may use the operator verbs.
func (p *principal) operated() []string {
	var out []string
	for _, a := range p.accounts() {
		if p.canOperate(a) {
			out = append(out, a)
		}
	}
	return out
}

// errNotOperator refuses an operator verb to a caller who operates no
// account.
var errNotOperator = errForbidden("this needs the operator role on an account, or an account's operator token",
	"sign in as an operator with `runos login`, or set RUNOS_TOKEN to an operator token")

var (
	errNoToken = &api.Error{Status: 401, Code: api.CodeUnauthorized,
		Message: "no bearer token: sign in first", Hint: "run `runos vpn up` (devices) or `runos login` (operators), or set RUNOS_TOKEN"}
	errUnknownToken = &api.Error{Status: 401, Code: api.CodeUnauthorized,
		Message: "unknown or revoked token", Hint: "sign in again: `runos vpn up` or `runos login`"}
	errEnded = &api.Error{Status: 401, Code: api.CodeUnauthorized,
		Message: "this session was ended (signed out, or by an operator)", Hint: "sign in again: `runos vpn up` or `runos login`"}
)

// errDeviceRevoked answers the session of a device that was revoked or
// removed: the daemon shows it as revoked and makes a new key.
func errDeviceRevoked(at time.Time) *api.Error {
	return &api.Error{Status: 401, Code: api.CodeDeviceRevoked, At: at.UTC(),
		Message: fmt.Sprintf("this device was removed from RunOS at %s: its session ended and its key is refused", at.UTC().Format(time.RFC3339)),
		Hint:    "`runos vpn up` signs in again with a new key"}
}

func errExpired(at time.Time) *api.Error {
	return &api.Error{Status: 401, Code: api.CodeSessionExpired,
		Message: fmt.Sprintf("your sign-in expired at %s", at.UTC().Format(time.RFC3339)),
		Hint:    "sign in again: `runos vpn up` (it restores the clusters you had connected)"}
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// authCache remembers the principals of live sessions: a device's map
// long-poll re-checks its session after every wake, and 10,000 of them
// waking at once must not become 10,000 queries. An entry is good while
// its session's topic has not moved and the session has not expired; the
// least recently used is forgotten first (control/lru).
type authCache struct {
	c *lru.Cache[string, *principal] // by token hash
}

const authCacheMax = 200_000

func (c *authCache) init() { c.c = lru.New[string, *principal](authCacheMax) }

func (c *authCache) get(hash string) *principal {
	p, _ := c.c.Get(hash)
	return p
}

func (c *authCache) put(hash string, p *principal) { c.c.Put(hash, p) }

// authenticate resolves the request's bearer token.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (*principal, *api.Error) {
	tok := bearer(r)
	if tok == "" {
		return nil, errNoToken
	}
	return s.principalOf(ctx, token.Hash(tok))
}

func (s *Server) principalOf(ctx context.Context, hash string) (*principal, *api.Error) {
	now := s.now()
	if p := s.auth.get(hash); p != nil && p.sesTopic.Version() <= p.sesVer {
		if !now.Before(p.session.ExpiresAt) {
			return nil, errExpired(p.session.ExpiresAt)
		}
		return p, nil
	}
	var p *principal
	var apiErr *api.Error
	err := s.st.View(ctx, func(r store.Reader) error {
		sess, err := r.SessionByToken(hash)
		switch {
		case err == nil:
			if apiErr = sessionRefusal(sess, now); apiErr != nil {
				return nil
			}
			u, err := r.User(sess.User)
			if err != nil {
				return err
			}
			topic := s.hub.Topic(hub.Session(sess.ID))
			v, err := r.TopicVersion(topic.Name())
			if err != nil {
				return err
			}
			info, err := json.Marshal(api.SessionInfo{ID: sess.ID, User: sess.User, ExpiresAt: sess.ExpiresAt})
			if err != nil {
				return err
			}
			p = &principal{kind: kindUser, user: u, session: sess, sesVer: v, sesTopic: topic, sesJSON: info}
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if k, err := r.APITokenByHash(hash); err == nil {
			if apiErr = tokenRefusal(k, now); apiErr == nil {
				p = &principal{kind: kindOperator, aid: k.AID, token: k}
			}
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if n, err := r.NodeByEnrollmentToken(hash); err == nil {
			p = &principal{kind: kindGateway, node: n}
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		apiErr = errUnknownToken
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			return nil, errStoreUnavailable
		}
		return nil, s.internal(ctx, "authenticate", err)
	}
	if apiErr != nil {
		return nil, apiErr
	}
	p.hash = hash
	switch p.kind {
	case kindUser:
		s.auth.put(hash, p)
	case kindOperator:
		s.tokenUsed(ctx, p.token, now)
	}
	return p, nil
}

// withAuth wraps a handler that needs a caller of one of kinds.
func (s *Server) withAuth(h func(http.ResponseWriter, *http.Request, *principal), kinds ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, e := s.authenticate(r.Context(), r)
		if e != nil {
			refuseBeforeBody(w, r)
			writeError(w, e)
			return
		}
		ok := false
		for _, k := range kinds {
			ok = ok || p.kind == k
		}
		if !ok {
			refuseBeforeBody(w, r)
			writeError(w, wrongKind(p.kind))
			return
		}
		h(w, r, p)
	}
}

// refuseBeforeBody makes a refusal answer at once: over HTTP/1.x, net/http
// would first read what is left of the request's body (up to 256 KB) to
// keep the connection, and a body that never comes would hold the answer
// and the connection. The connection is closed instead; nothing of the
// body is read.
func refuseBeforeBody(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

func wrongKind(kind string) *api.Error {
	switch kind {
	case kindGateway:
		return errForbidden("a node's enrollment token may only use /v1/gateway", "")
	case kindOperator:
		return errForbidden("an operator token is not a sign-in: devices and sessions need a user's sign-in", "run `runos vpn up`")
	default:
		return errForbidden("this route is for gateways (a node's enrollment token)", "")
	}
}

// OAuth backend: control/oauth checks passwords and creates sessions here.

// CheckPassword implements oauth.Backend with bcrypt against the store. An
// unknown user costs the same bcrypt comparison as a wrong password.
func (s *Server) CheckPassword(ctx context.Context, email, password string) (bool, error) {
	var hash string
	err := s.st.View(ctx, func(r store.Reader) error {
		u, err := r.User(email)
		if err == nil {
			hash = u.PasswordHash
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		// Not naming what was typed as the email: it may be a password.
		return false, fmt.Errorf("check a password: %w", err)
	}
	if hash == "" {
		_ = bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
		return false, nil
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil, nil
}

var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("no such user"), 12)
	return h
})

// CreateSession implements oauth.Backend: a session of --session-ttl whose
// token is returned once and stored as its hash. A session issued from an
// authorization code takes its id from the code's hash (token.IDFor), so
// that RevokeGrant finds it if the code is ever presented again.
func (s *Server) CreateSession(ctx context.Context, email, clientID, grant string) (string, time.Time, error) {
	tok := token.New()
	now := s.now()
	id := token.ID("ses")
	if grant != "" {
		id = token.IDFor("ses", grant)
	}
	sess := model.Session{ID: id, TokenHash: token.Hash(tok), User: email, ClientID: clientID,
		State: model.SessionLive, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL)}
	err := s.update(ctx, func(w store.Writer) error {
		u, err := w.User(email)
		if err != nil {
			return err
		}
		sess.User = u.Email // as the store spells it, whatever case was typed
		// Told, so that the replica acting on timers (timers.go) arms its expiry.
		w.Touch(hub.Session(sess.ID))
		if err := w.PutSession(sess); err != nil {
			return err
		}
		return audit.Record(w, audit.Entry{At: now, AIDs: u.Accounts, Actor: audit.User(u.Email), Source: audit.Source(ctx),
			Kind: audit.SignedIn, Target: sess.ID,
			Outcome: fmt.Sprintf("signed in with %s until %s", clientID, sess.ExpiresAt.UTC().Format(time.RFC3339))})
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("create session for %s: %w", email, err)
	}
	s.log.Info("session started", "user", sess.User, "client", clientID, "session", sess.ID, "expires", sess.ExpiresAt)
	s.armExpiry(sess.ExpiresAt)
	return tok, sess.ExpiresAt, nil
}

// RevokeGrant implements oauth.Backend: the session issued from grant ends
// now, as if signed out (its devices leave every gateway), if it is live.
func (s *Server) RevokeGrant(ctx context.Context, grant string) (bool, error) {
	id := token.IDFor("ses", grant)
	revoked := false
	err := s.update(ctx, func(tx store.Writer) error {
		sess, err := tx.Session(id)
		if errors.Is(err, store.ErrNotFound) || err == nil && sess.State != model.SessionLive {
			return nil
		} else if err != nil {
			return err
		}
		revoked = true
		now := s.now()
		aids, err := sessionAccounts(tx, sess)
		if err != nil {
			return err
		}
		if err := closeSession(tx, sess, model.SessionEnded, now); err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{At: now, AIDs: aids, Actor: audit.Control, Source: audit.Source(ctx),
			Kind: audit.SessionEnded, Target: sess.ID,
			Outcome: fmt.Sprintf("ended: the authorization code that signed %s in was presented again", sess.User)})
	})
	if err != nil {
		return false, fmt.Errorf("revoke session %s: %w", id, err)
	}
	if revoked {
		s.afterSessionsClosed()
	}
	if revoked {
		s.log.Warn("session revoked: its authorization code was presented again", "session", id)
	}
	return revoked, nil
}

var _ oauth.Backend = (*Server)(nil)
