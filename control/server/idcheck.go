package server

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/oidc"
	"github.com/runos/vpn/control/store"
)

// A user removed or disabled at the identity provider loses access within
// Config.IdentityCheckEvery (15 minutes): control keeps the provider's
// refresh token of each user's last sign-in through it (sealed with
// AES-GCM under a key from the store's shared secrets, so that a copy of
// the database alone opens nothing), and the timers' lease holder asks the
// provider about every user with a live session once per period. The
// provider's refusal (invalid_grant: removed, disabled, the grant revoked)
// or no refresh token at all ends the user's live sessions, as an
// operator's `runos sessions revoke` does, with its own reason for the
// daemon's status. A refresh that succeeds sets the user's groups to the
// provider's, as a sign-in does.
//
// The grant is the user's, not one session's: the provider answers about
// the person, so one refresh per user and period is enough, and a person
// the provider disowns loses every session (a password one too, if the
// world file gave them a password).

// IdentityChecker is the identity provider as the check asks it
// (control/oidc's Upstream).
type IdentityChecker interface {
	Refresh(ctx context.Context, refreshToken string) (oidc.Identity, error)
}

const identityCheckKey = "identity-check"

// errDisowned answers a session ended because the provider no longer
// accepts the user's sign-in.
var errDisowned = &api.Error{Status: 401, Code: api.CodeUnauthorized,
	Message: "your identity provider no longer accepts this sign-in (you were removed or disabled there, or your access was revoked), so RunOS ended it",
	Hint:    "ask your administrator, then sign in again: `runos vpn up`"}

// identityKey reads the key grants are sealed under: the store's, shared
// by every replica.
func (s *Server) identityKey(ctx context.Context) error {
	if s.cfg.Identity == nil {
		return nil
	}
	key, err := s.st.Secret(ctx, "identity-grants", 32)
	if err != nil {
		return fmt.Errorf("the identity provider grants' key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return err
	}
	s.grantKey, err = cipher.NewGCM(block)
	return err
}

// sealRefresh seals a refresh token for email (the email is the
// additional data: a grant moved to another user opens to nothing).
func (s *Server) sealRefresh(email, refresh string) []byte {
	nonce := make([]byte, s.grantKey.NonceSize())
	_, _ = rand.Read(nonce)
	return s.grantKey.Seal(nonce, nonce, []byte(refresh), []byte(strings.ToLower(email)))
}

func (s *Server) openRefresh(g model.IdentityGrant) (string, error) {
	n := s.grantKey.NonceSize()
	if len(g.SealedRefresh) < n {
		return "", errors.New("sealed refresh token too short")
	}
	b, err := s.grantKey.Open(nil, g.SealedRefresh[:n], g.SealedRefresh[n:], []byte(strings.ToLower(g.Email)))
	return string(b), err
}

// keepGrant records id's refresh token as email's grant, in the sign-in's
// change.
func (s *Server) keepGrant(w store.Writer, email string, id oidc.Identity) error {
	if s.grantKey == nil {
		return nil
	}
	return w.PutIdentityGrant(model.IdentityGrant{Email: email, Subject: id.Subject,
		SealedRefresh: s.sealRefresh(email, id.RefreshToken), SignedInAt: s.now()})
}

// armIdentityCheck arms the next round at at; only the lease holder arms.
func (s *Server) armIdentityCheck(at time.Time) {
	if s.cfg.Identity != nil {
		s.after(identityCheckKey, at, s.checkIdentities)
	}
}

// checkIdentities is one round: every grant whose user has a live session
// is refreshed at the provider; grants of users long without one are
// forgotten. Then the next round is armed.
func (s *Server) checkIdentities() {
	defer func() { s.armIdentityCheck(s.now().Add(s.cfg.IdentityCheckEvery)) }()
	ctx, cancel := s.bg()
	defer cancel()
	now := s.now()
	var due, stale []model.IdentityGrant
	err := s.st.View(ctx, func(r store.Reader) error {
		gs, err := r.IdentityGrants()
		for _, g := range gs {
			ss, err := r.LiveSessionsOfUser(g.Email, now)
			if err != nil {
				return err
			}
			switch {
			case len(ss) > 0:
				due = append(due, g)
			case now.Sub(g.SignedInAt) > s.cfg.SessionTTL+time.Hour:
				// No session from this sign-in can be live any more (each
				// is made within the hour a device code lasts).
				stale = append(stale, g)
			}
		}
		return err
	})
	if err != nil {
		s.log.Error("identity provider check: read the grants", "err", err)
		return
	}
	for _, g := range stale {
		s.forgetGrant(ctx, g)
	}
	failed, inARow := 0, 0
	for i, g := range due {
		if s.checkIdentity(g) {
			inARow = 0
			continue
		}
		failed++
		// A provider that does not answer three users in a row is down
		// (or cut off): asking each of the rest, each up to its timeout,
		// would hold the round for hours; the next round asks them all.
		if inARow++; inARow == maxUnanswered {
			s.log.Warn("identity provider check: the provider does not answer; the round stops here", "unasked", len(due)-i-1)
			break
		}
	}
	if len(due) > 0 {
		s.log.Info("identity provider check", "users", len(due), "unanswered", failed)
	}
}

// maxUnanswered is how many users in a row the provider may leave
// unanswered before a round gives up.
const maxUnanswered = 3

// checkIdentity asks the provider about g's user and acts on the answer.
// It reports false when the provider did not answer.
func (s *Server) checkIdentity(g model.IdentityGrant) bool {
	refresh, err := s.openRefresh(g)
	if err != nil {
		s.disown(g, "its grant could not be opened ("+err.Error()+")")
		return true
	}
	if refresh == "" {
		s.disown(g, "the provider issued no refresh token at sign-in, so the sign-in cannot be checked again")
		return true
	}
	ctx, cancel := s.bg()
	defer cancel()
	go func() { // a closing server does not wait for the provider
		select {
		case <-s.closeCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	id, err := s.cfg.Identity.Refresh(ctx, refresh)
	switch {
	case errors.Is(err, oidc.ErrGone):
		s.disown(g, err.Error())
	case err != nil:
		// The provider unreachable, answering 5xx or refusing control
		// itself (a rotated client secret) says nothing about the user:
		// ending every session of the company during the provider's
		// outage would be worse than the outage. The sessions stay, and
		// the next round asks again; a user removed meanwhile is refused
		// then, and no session outlives its 24 hours anyway.
		s.log.Warn("identity provider check: no answer about a user; their sessions stay until the next round", "user", g.Email, "err", err)
		return false
	case id.Subject != "" && subtle.ConstantTimeCompare([]byte(id.Subject), []byte(g.Subject)) != 1:
		s.disown(g, fmt.Sprintf("the provider answered about another user (%s)", id.Subject))
	default:
		s.renewGrant(ctx, g, id)
	}
	return true
}

// renewGrant keeps the rotated refresh token and sets the user's groups
// to the provider's (when it sent them), unless a new sign-in replaced
// the grant meanwhile.
func (s *Server) renewGrant(ctx context.Context, g model.IdentityGrant, id oidc.Identity) {
	err := s.update(ctx, func(w store.Writer) error {
		cur, err := w.IdentityGrant(g.Email)
		if errors.Is(err, store.ErrNotFound) || err == nil && !sameGrant(cur, g) {
			return nil
		} else if err != nil {
			return err
		}
		cur.SealedRefresh = s.sealRefresh(g.Email, id.RefreshToken)
		if err := w.PutIdentityGrant(cur); err != nil {
			return err
		}
		if id.Subject == "" || s.cfg.IdentityAccount == "" { // no ID token on refresh: no groups
			return nil
		}
		return s.applyIdentityGroups(ctx, w, g.Email, id.Groups, "")
	})
	if err != nil {
		// The provider rotated the token and it was not kept: the next
		// round's refresh with the old one may be refused, ending the
		// user's sessions; they sign in again.
		s.log.Error("identity provider check: keep the renewed grant", "user", g.Email, "err", err)
	}
}

// disown ends every live session of g's user, why being the provider's
// refusal, and forgets the grant, unless a new sign-in replaced the
// grant meanwhile (the user was enabled again and signed in).
func (s *Server) disown(g model.IdentityGrant, why string) {
	ctx, cancel := s.bg()
	defer cancel()
	now := s.now()
	var ended []string
	err := s.update(ctx, func(w store.Writer) error {
		ended = nil
		cur, err := w.IdentityGrant(g.Email)
		if errors.Is(err, store.ErrNotFound) || err == nil && !sameGrant(cur, g) {
			return nil
		} else if err != nil {
			return err
		}
		if err := w.DeleteIdentityGrant(g.Email); err != nil {
			return err
		}
		ss, err := w.LiveSessionsOfUser(g.Email, now)
		if err != nil {
			return err
		}
		aids := []string{}
		if s.cfg.IdentityAccount != "" {
			aids = append(aids, s.cfg.IdentityAccount)
		}
		var devices []string
		for _, sess := range ss {
			sa, err := sessionAccounts(w, sess)
			if err != nil {
				return err
			}
			aids = append(aids, sa...)
			devs, err := w.DevicesOfSession(sess.ID)
			if err != nil {
				return err
			}
			for _, d := range devs {
				devices = append(devices, d.ID)
			}
			if err := closeSession(w, sess, model.SessionDisowned, now); err != nil {
				return err
			}
			ended = append(ended, sess.ID)
		}
		outcome := fmt.Sprintf("ended %d session(s) of %s: the identity provider no longer accepts the sign-in: %s", len(ended), g.Email, why)
		if len(devices) > 0 {
			outcome += "; devices " + strings.Join(devices, ", ") + " dropped"
		}
		return audit.Record(w, audit.Entry{At: now, AIDs: aids, Actor: audit.Control, Kind: audit.SessionEnded,
			Target: "all sessions of " + g.Email, Outcome: outcome})
	})
	if err != nil {
		s.log.Error("identity provider check: end the sessions of a user the provider refused", "user", g.Email, "err", err)
		return
	}
	if len(ended) > 0 {
		s.log.Info("sessions ended: the identity provider no longer accepts the user", "user", g.Email, "sessions", ended, "why", why)
		s.afterSessionsClosed()
	}
}

// forgetGrant deletes a grant no live session needs, unless it was
// replaced meanwhile.
func (s *Server) forgetGrant(ctx context.Context, g model.IdentityGrant) {
	err := s.update(ctx, func(w store.Writer) error {
		cur, err := w.IdentityGrant(g.Email)
		if errors.Is(err, store.ErrNotFound) || err == nil && !sameGrant(cur, g) {
			return nil
		} else if err != nil {
			return err
		}
		return w.DeleteIdentityGrant(g.Email)
	})
	if err != nil {
		s.log.Error("identity provider check: forget an unused grant", "user", g.Email, "err", err)
	}
}

func sameGrant(a, b model.IdentityGrant) bool {
	return a.SignedInAt.Equal(b.SignedInAt) && subtle.ConstantTimeCompare(a.SealedRefresh, b.SealedRefresh) == 1
}
