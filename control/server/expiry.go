package server

import (
	"context"
	"errors"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// Session expiry is acted on at the instant it happens: one timer, armed
// for the earliest expiry of a live session and re-armed after each firing
// and whenever a session that expires sooner is created. When it fires, the
// sessions due are marked expired and their devices leave every gateway's
// peers in one transaction, which also wakes their map long-polls (to
// answer 401 session_expired). Sessions that ended or expired more than the
// retention period ago are forgotten by the same timer (armed for the
// earlier of the two), after which their tokens are simply unknown.

const expiryKey = "session-expiry"

// armExpiry makes sure the expiry timer fires no later than at.
func (s *Server) armExpiry(at time.Time) {
	s.mu.Lock()
	armed := s.expiry
	if !s.leading || !armed.IsZero() && !at.Before(armed) {
		s.mu.Unlock()
		return
	}
	s.expiry = at
	s.mu.Unlock()
	s.after(expiryKey, at, s.expireSessions)
}

// expireSessions expires every live session due now, then arms the timer
// for the next one.
func (s *Server) expireSessions() {
	ctx, cancel := s.bg()
	defer cancel()
	now := s.now()
	var expired []model.Session
	err := s.update(ctx, func(tx store.Writer) error {
		var err error
		expired, err = tx.LiveSessionsExpiringBy(now)
		if err != nil {
			return err
		}
		for _, sess := range expired {
			if err := closeSession(tx, sess, model.SessionExpired, sess.ExpiresAt); err != nil {
				return err
			}
		}
		_, err = tx.DeleteSessionsEndedBy(now.Add(-s.cfg.SessionRetention))
		return err
	})
	if err != nil {
		s.log.Error("expire sessions", "err", err)
		if errors.Is(err, store.ErrUnavailable) {
			// The database is back in a moment (a restart, a failover):
			// lapsed sessions must leave the gateways as soon as it is.
			s.mu.Lock()
			s.expiry = time.Time{}
			s.mu.Unlock()
			s.armExpiry(now.Add(time.Second))
			return
		}
	}
	for _, sess := range expired {
		s.log.Info("session expired", "session", sess.ID, "user", sess.User, "at", sess.ExpiresAt)
	}
	if len(expired) > 0 {
		s.afterSessionsClosed()
	}
	s.mu.Lock()
	s.expiry = time.Time{}
	s.mu.Unlock()
	s.armNextExpiry(ctx)
}

// armNextExpiry arms the expiry timer for the earliest expiry of a live
// session, or the earliest forgetting of an ended one.
func (s *Server) armNextExpiry(ctx context.Context) {
	var next time.Time
	var ok bool
	if err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		next, ok, err = r.NextExpiry()
		if err != nil {
			return err
		}
		// Forgetting old sessions is due then too.
		ended, endedOK, err := r.FirstEnded()
		if endedOK {
			forget := ended.Add(s.cfg.SessionRetention)
			if !ok || forget.Before(next) {
				next, ok = forget, true
			}
		}
		return err
	}); err != nil {
		s.log.Error("next session expiry", "err", err)
		next, ok = s.now().Add(time.Minute), true // try again soon rather than never
	}
	if ok {
		s.armExpiry(next)
	}
}
