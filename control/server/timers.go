package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/internal/backoff"
)

// Timers: session expiry, a move's ready timeout and deadline, a service's
// install timeout, idle devices' clean-up (idle.go), the identity
// provider's check of its users (idcheck.go). Each is acted on by exactly one replica, the one holding
// the store's "timers" lease (always this one on SQLite). The holder arms
// them from the store when it gets the lease (so nothing is lost across a
// restart or a takeover: a lapsed session is expired at once), arms new
// ones as this replica creates them, and, when other replicas share the
// store, re-arms them from what the hub hears of the others' changes. The
// actions are conditional changes (expire what is live and due, fail a
// move still preparing…), so a timer fired twice across a takeover acts
// once.
//
// When the holder dies its lease goes with its database connection, and
// another replica, waiting for it, takes it over at once.

const timersLease = "timers"

type timer struct {
	at time.Time
	t  clock.Timer
}

// after runs fn at t (at once if t has passed), replacing any timer with
// the same key for another time; a timer armed again for the same time is
// left as it is. Only the lease holder arms timers.
func (s *Server) after(key string, t time.Time, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.leading {
		return
	}
	old := s.timers[key]
	if old != nil && old.at.Equal(t) {
		return
	}
	if old != nil {
		old.t.Stop()
	}
	tm := &timer{at: t}
	tm.t = s.clock.AfterFunc(t.Sub(s.clock.Now()), func() {
		s.mu.Lock()
		if s.closed || !s.leading || s.timers[key] != tm {
			s.mu.Unlock()
			return
		}
		delete(s.timers, key)
		s.bgWG.Add(1)
		s.mu.Unlock()
		defer s.bgWG.Done()
		fn()
	})
	s.timers[key] = tm
}

// timerRetry is how soon a timer whose action failed on the store runs
// again (afterStore).
const timerRetry = time.Second

// afterStore is after for an action on the store: one that fails with the
// store out of reach (storeDown: the database restarting, a connection
// cut) runs again timerRetry later, under the same key. The timer is
// removed as it fires, so without this a move would stay switching, or a
// service installing, until the next takeover of the lease re-armed it
// from the store, and a failure that keeps the lease's own connection
// brings none. The actions are conditional changes: one that did commit
// before its error is a no-op the second time.
func (s *Server) afterStore(key string, t time.Time, fn func() error) {
	s.after(key, t, func() {
		if err := fn(); storeDown(err) {
			s.afterStore(key, s.now().Add(timerRetry), fn)
		}
	})
}

// storeDown reports whether err is the database out of reach (down, a
// connection cut, no answer within the action's time): worth a timer's
// retry (afterStore). Any other error would fail the same way again.
func storeDown(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// cancelTimer stops the timer with that key, if any.
func (s *Server) cancelTimer(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.timers[key]; old != nil {
		old.t.Stop()
		delete(s.timers, key)
	}
}

func (s *Server) stopTimersLocked() {
	for k, t := range s.timers {
		t.t.Stop()
		delete(s.timers, k)
	}
	s.expiry = time.Time{}
	s.idleAt = time.Time{}
}

// lead makes this replica the one acting on timers, holding l: it acts on
// what fell due while nobody held the lease and arms the rest from the
// store.
func (s *Server) lead(ctx context.Context, l store.Lease) error {
	s.mu.Lock()
	s.leading = true
	s.mu.Unlock()
	s.log.Info("timers: this replica acts on session expiry, move deadlines, install timeouts and idle devices")
	s.expireSessions()
	s.cleanIdle()
	s.armIdentityCheck(s.now().Add(s.cfg.IdentityCheckEvery))
	var moves, installs []string
	err := s.st.View(ctx, func(r store.Reader) error {
		ms, err := r.InFlightMoves()
		if err != nil {
			return err
		}
		for _, m := range ms {
			moves = append(moves, m.ID)
		}
		svcs, err := r.InstallingServices()
		for _, svc := range svcs {
			installs = append(installs, svc.ID)
		}
		return err
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range moves {
		errs = append(errs, s.armMoveTimers(ctx, id))
	}
	for _, id := range installs {
		errs = append(errs, s.armInstall(ctx, id))
	}
	return errors.Join(errs...)
}

// leaseLoop holds the timers' lease while it can and waits for it when
// another replica holds it. l is the lease Start got, or nil.
func (s *Server) leaseLoop(l store.Lease) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-s.closeCh
		cancel()
	}()
	defer cancel()
	retry := backoff.New(100*time.Millisecond, 5*time.Second)
	for {
		if l != nil {
			select {
			case <-l.Lost():
				s.mu.Lock()
				s.leading = false
				s.stopTimersLocked()
				s.mu.Unlock()
				s.log.Warn("timers: lease lost (the database connection went); another replica takes over, or this one once it can")
			case <-s.closeCh:
				l.Release()
				return
			}
		}
		var err error
		l, err = s.st.Lease(ctx, timersLease)
		if err != nil {
			l = nil
			if retry.Wait(ctx) != nil { // ctx ends when the server closes
				return
			}
			continue
		}
		retry.Reset()
		s.leadUntilArmed(ctx, l, retry)
	}
}

// leadUntilArmed leads with l, trying again while arming from the store
// fails (the database restarting, a connection cut): holding the lease
// with nothing armed would leave every move, install and expiry to wait
// for the next takeover, which a failure that keeps the lease's own
// connection never brings.
func (s *Server) leadUntilArmed(ctx context.Context, l store.Lease, retry *backoff.Backoff) {
	defer retry.Reset()
	for {
		err := s.lead(ctx, l)
		if err == nil {
			return
		}
		s.log.Error("timers: arm from the store; trying again", "err", err)
		select {
		case <-l.Lost():
			return // the loop sees it too
		case <-ctx.Done():
			return
		case <-time.After(retry.Next()):
		}
	}
}

// rearmQueue holds the topics heard since the re-arm loop last looked.
type rearmQueue struct {
	mu     sync.Mutex
	topics map[string]bool
	wake   chan struct{}
}

// heard is the hub's publish hook (with other replicas): it notes the
// topics that may carry a timer, for rearmLoop.
func (s *Server) heard(_ uint64, topics []string) {
	q := &s.rearm
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, t := range topics {
		if strings.HasPrefix(t, "move:") || strings.HasPrefix(t, "service:") || strings.HasPrefix(t, "session:") {
			if q.topics == nil {
				q.topics = map[string]bool{}
			}
			q.topics[t] = true
		}
	}
	if len(q.topics) > 0 {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// rearmLoop re-arms, on the lease holder, the timers of the sessions,
// moves and services other replicas changed.
func (s *Server) rearmLoop() {
	for {
		select {
		case <-s.closeCh:
			return
		case <-s.rearm.wake:
		}
		s.rearm.mu.Lock()
		topics := s.rearm.topics
		s.rearm.topics = nil
		s.rearm.mu.Unlock()
		s.mu.Lock()
		leading := s.leading
		s.mu.Unlock()
		if !leading {
			continue
		}
		ctx, cancel := s.bg()
		sessions := false
		var failed []string
		for t := range topics {
			kind, id, _ := strings.Cut(t, ":")
			var err error
			switch kind {
			case "move":
				err = s.armMoveTimers(ctx, id)
			case "service":
				err = s.armInstall(ctx, id)
			case "session":
				sessions = true
			}
			if err != nil {
				s.log.Error("timers: re-arm after another replica's change; trying again", "err", err, "in", timerRetry)
				failed = append(failed, t)
			}
		}
		if len(failed) > 0 {
			time.AfterFunc(timerRetry, func() { s.heard(0, failed) })
		}
		if sessions {
			// A session that began or closed elsewhere: its expiry, and
			// the idle clean-up of its devices.
			s.armNextExpiry(ctx)
			s.afterSessionsClosed()
		}
		cancel()
	}
}

// armInstall arms an added service's install timeout while it is
// installing, from the time it was added. Its error is the store's, for
// the caller to try again.
func (s *Server) armInstall(ctx context.Context, id string) error {
	var state string
	var created time.Time
	err := s.st.View(ctx, func(r store.Reader) error {
		svc, err := r.Service(id)
		state, created = svc.State, svc.CreatedAt
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		s.cancelTimer("install:" + id)
		return nil
	}
	if err != nil {
		return fmt.Errorf("arm the install timeout of service %s: %w", id, err)
	}
	if state != "installing" {
		s.cancelTimer("install:" + id)
		return nil
	}
	s.afterStore("install:"+id, created.Add(s.cfg.MoveReadyTimeout), func() error { return s.installTimeout(id) })
	return nil
}
