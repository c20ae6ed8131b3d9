package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// An operator lists a user's live sessions and ends one or all of them:
// the session ends as `runos vpn down` ends it, so the user's devices drop
// off every gateway by the same push. Of a user who also belongs to
// accounts the caller does not operate, only the sessions within reach
// (reach.go) are listed, and one that also holds a device in another
// account's cluster is not ended: its devices leave the caller's clusters
// (access_scope.go).

// operatedUser reads a user of an account the caller operates (404 for
// anyone else, so that no account learns of another's users), and the
// reach of the accounts aid names.
func operatedUser(rd store.Reader, p *principal, aid, email string) (model.User, *reach, error) {
	aids, err := operatedAccounts(p, aid)
	if err != nil {
		return model.User{}, nil, err
	}
	if email == "" {
		return model.User{}, nil, errInvalid("user: say whose sessions (--user EMAIL)")
	}
	x := newReach(rd, aids)
	u, err := x.user(email)
	if err == nil && x.touches(u) {
		return u, x, nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return model.User{}, nil, err
	}
	return model.User{}, nil, errNotFound("no user %s in %s", email, strings.Join(aids, ", "))
}

// liveSessions are u's sessions live at now within x.
func liveSessions(rd store.Reader, x *reach, u model.User, now time.Time) ([]model.Session, error) {
	ss, err := rd.LiveSessionsOfUser(u.Email, now)
	if err != nil {
		return nil, err
	}
	var out []model.Session
	for _, sess := range ss {
		ok, err := x.session(sess)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, sess)
		}
	}
	return out, nil
}

// sessionDoc is sess as an operator sees it: with its devices within x.
func sessionDoc(rd store.Reader, x *reach, sess model.Session) (api.Session, error) {
	out := api.Session{ID: sess.ID, User: sess.User, Client: sess.ClientID, CreatedAt: sess.CreatedAt, ExpiresAt: sess.ExpiresAt, Devices: []string{}}
	devs, err := rd.DevicesOfSession(sess.ID)
	if err != nil {
		return out, err
	}
	for _, d := range devs {
		ok, err := x.device(d)
		if err != nil {
			return out, err
		}
		if ok {
			out.Devices = append(out.Devices, d.ID)
		}
	}
	return out, nil
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request, p *principal) {
	q := r.URL.Query()
	out := []api.Session{}
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		u, x, err := operatedUser(rd, p, q.Get("aid"), strings.TrimSpace(q.Get("user")))
		if err != nil {
			return err
		}
		ss, err := liveSessions(rd, x, u, s.now())
		if err != nil {
			return err
		}
		for _, sess := range ss {
			d, err := sessionDoc(rd, x, sess)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// endSessions ends sessions of u inside tx and records one entry. A
// session that is not only the caller's accounts' (a device of it in a
// cluster of an account x does not reach) is not ended: its devices leave
// the caller's clusters instead (access_scope.go).
func (s *Server) endSessions(tx store.Writer, r *http.Request, p *principal, x *reach, u model.User, target string, ss []model.Session, now time.Time) (api.EndedSessions, error) {
	out := api.EndedSessions{Ended: []string{}, Devices: []string{}}
	var aids []string
	addAccounts := func(sa []string) {
		for _, a := range sa {
			if !slices.Contains(aids, a) {
				aids = append(aids, a)
			}
		}
	}
	for _, sess := range ss {
		devs, err := tx.DevicesOfSession(sess.ID)
		if err != nil {
			return out, err
		}
		foreign, err := x.sessionForeign(tx, sess)
		if err != nil {
			return out, err
		}
		if foreign {
			for _, d := range devs {
				cids, sa, err := x.cutFromMine(tx, d)
				if err != nil {
					return out, err
				}
				if len(cids) > 0 {
					out.Devices = append(out.Devices, d.ID)
				}
				addAccounts(sa)
			}
			out.Cut = append(out.Cut, sess.ID)
			continue
		}
		sa, err := sessionAccounts(tx, sess)
		if err != nil {
			return out, err
		}
		addAccounts(sa)
		for _, d := range devs {
			out.Devices = append(out.Devices, d.ID)
		}
		if err := closeSession(tx, sess, model.SessionEnded, now); err != nil {
			return out, err
		}
		out.Ended = append(out.Ended, sess.ID)
	}
	slices.Sort(aids)
	return out, s.record(tx, r, p, audit.Entry{AIDs: aids, Kind: audit.SessionEnded, Target: target, Outcome: endedOutcome(u, out)})
}

// endedOutcome says what endSessions did, for the audit entry.
func endedOutcome(u model.User, out api.EndedSessions) string {
	outcome := fmt.Sprintf("ended %d session(s) of %s", len(out.Ended), u.Email)
	if len(out.Ended) > 0 {
		outcome += ": " + strings.Join(out.Ended, ", ")
	}
	if len(out.Cut) > 0 {
		outcome += "; kept " + strings.Join(out.Cut, ", ") + " (also in clusters of accounts you do not operate), its devices out of your clusters"
	}
	if len(out.Devices) > 0 {
		outcome += "; devices " + strings.Join(out.Devices, ", ") + " dropped"
	}
	return outcome
}

func (s *Server) handleEndUserSession(w http.ResponseWriter, r *http.Request, p *principal) {
	id := r.PathValue("id")
	now := s.now()
	var out api.EndedSessions
	err := s.update(r.Context(), func(tx store.Writer) error {
		if _, err := operatedAccounts(p, ""); err != nil {
			return err
		}
		notFound := errNotFound("no live session %s among your account's users (list them: runos sessions list --user EMAIL)", id)
		sess, err := tx.Session(id)
		if errors.Is(err, store.ErrNotFound) {
			return notFound
		} else if err != nil {
			return err
		}
		u, x, err := operatedUser(tx, p, "", sess.User)
		if isNotFound(err) || err == nil && !sess.LiveAt(now) {
			return notFound
		} else if err != nil {
			return err
		}
		if ok, err := x.session(sess); err != nil {
			return err
		} else if !ok {
			return notFound
		}
		out, err = s.endSessions(tx, r, p, x, u, sess.ID, []model.Session{sess}, now)
		return err
	})
	if err != nil {
		s.fail(w, r, fmt.Errorf("end session %s: %w", id, err))
		return
	}
	s.log.Info("session ended by an operator", "session", id, "by", p.actor().String())
	s.afterSessionsClosed()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleEndUserSessions(w http.ResponseWriter, r *http.Request, p *principal) {
	q := r.URL.Query()
	email := strings.TrimSpace(q.Get("user"))
	now := s.now()
	var out api.EndedSessions
	err := s.update(r.Context(), func(tx store.Writer) error {
		u, x, err := operatedUser(tx, p, q.Get("aid"), email)
		if err != nil {
			return err
		}
		ss, err := liveSessions(tx, x, u, now)
		if err != nil {
			return err
		}
		if len(ss) == 0 {
			return errNotFound("%s has no live session", u.Email)
		}
		out, err = s.endSessions(tx, r, p, x, u, "all sessions of "+u.Email, ss, now)
		return err
	})
	if err != nil {
		s.fail(w, r, fmt.Errorf("end the sessions of %s: %w", email, err))
		return
	}
	s.log.Info("sessions ended by an operator", "user", email, "sessions", out.Ended, "by", p.actor().String())
	s.afterSessionsClosed()
	writeJSON(w, http.StatusOK, out)
}

func isNotFound(err error) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Code == api.CodeNotFound
}
