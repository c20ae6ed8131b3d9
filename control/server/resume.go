package server

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/resume"
	"github.com/runos/vpn/control/token"
)

// Resuming a device's map stream on another replica (issue 25). A stream
// of the device map is answered with a resume token (api.HeaderResume,
// control/resume) naming its device, session, user and the version of its
// session's topic; when its replica dies the daemon reconnects to a
// survivor with it, and the survivor takes the caller from the token
// instead of reading the session, the user and the topic from the store.
// 10,000 devices moving at once then cost the survivors their device
// reads, not ten round trips each.
//
// Revocation still wins. A token is refused, and the request goes through
// the full sign-in check as any other (withAuth), when it is forged,
// lapsed, shown with another bearer token or for another device, or when
// this replica's hub has heard of any change of the session since the
// token was issued: an end, an expiry or a revocation touches
// session:<id>, and every replica's hub starts from the store's versions
// and follows every commit. A change committed but not yet heard here
// wakes the resumed stream when it is (the session's topic is one of the
// stream's), and that wake checks the caller fully, as a stream's every
// wake does once its session moved (pollSource.Load). The device's own
// revocation is read with the device, on every load.

const (
	// resumeMaxAge bounds a token however long its session lasts: a
	// stream older than that resumes through the full check.
	resumeMaxAge = 24 * time.Hour
	// resumeEvery and resumeBurst pace the resumes a replica admits: a
	// burst at once, then one every resumeEvery, each with up to
	// resumeEvery of jitter, so that a dead replica's devices arriving
	// together are not served together (5,000 a second: 10,000 devices in
	// about two seconds).
	resumeEvery = 200 * time.Microsecond
	resumeBurst = 1000
	// resumeMaxWait bounds a resume's wait for its turn: a turn further off
	// is not taken, and the stream is checked in full instead (as it would
	// be without a token), so callers that queue and leave cannot push
	// every later resume out without end.
	resumeMaxWait = 3 * time.Second
)

// issueResume puts a resume token for p's stream of the device's map in
// the answer's header (sent with the stream's first event).
func (s *Server) issueResume(w http.ResponseWriter, p *principal, device string) {
	if s.resumes == nil || p.kind != kindUser {
		return
	}
	exp := s.now().Add(resumeMaxAge)
	if p.session.ExpiresAt.Before(exp) {
		exp = p.session.ExpiresAt
	}
	if p.resumed && p.resumeExp.Before(exp) {
		// A stream resumed from a token gets one that lapses no later:
		// resumeMaxAge after the full check, however often it resumes.
		exp = p.resumeExp
	}
	w.Header().Set(api.HeaderResume, s.resumes.Issue(resume.Claims{
		Device: device, Session: p.session.ID, User: p.user.Email, Hash: p.hash,
		SesVer: p.sesVer, SessionExpires: p.session.ExpiresAt, Expires: exp}))
}

// withResume is withAuth for the device map's stream: a request that
// carries a resume token this replica takes is served from it; any other,
// and one whose token is refused, is checked in full.
func (s *Server) withResume(h func(http.ResponseWriter, *http.Request, *principal)) http.HandlerFunc {
	full := s.withAuth(h, kindUser)
	return func(w http.ResponseWriter, r *http.Request) {
		rt := r.Header.Get(api.HeaderResume)
		if rt == "" || !s.wantsStream(r) {
			full(w, r)
			return
		}
		p, why := s.resumed(r, rt)
		if p == nil {
			s.log.Debug("stream resume refused: checking the sign-in in full", "device", r.PathValue("id"), "reason", why)
			full(w, r)
			return
		}
		// Paced once taken (an HMAC is cheap), so that junk tokens do not
		// queue ahead of real resumes. A session that moves meanwhile
		// wakes the stream at once: its topic is one of the stream's.
		switch s.admitResume(r.Context()) {
		case resumeGone:
			return // the client went away while queued
		case resumeFull:
			full(w, r) // the queue is longer than a resume may wait
			return
		}
		// The device's previous replica wrote its last contact at most
		// seenEvery ago: once admitted, this one does not write it again.
		s.seen.due(r.PathValue("id"), s.now())
		h(w, r, p)
	}
}

// resumed returns the caller that the resume token rt stands for, or why
// it does not stand for anyone.
func (s *Server) resumed(r *http.Request, rt string) (*principal, string) {
	tok := bearer(r)
	if tok == "" || s.resumes == nil {
		return nil, "no bearer token"
	}
	c, err := s.resumes.Check(rt, s.now())
	if err != nil {
		return nil, err.Error()
	}
	hash := token.Hash(tok)
	if c.Hash != hash || c.Device != r.PathValue("id") {
		return nil, "the resume token is another sign-in's or another device's"
	}
	topic := s.hub.Topic(hub.Session(c.Session))
	if topic.Version() > c.SesVer {
		return nil, "the session changed since the resume token was issued"
	}
	info, err := json.Marshal(api.SessionInfo{ID: c.Session, User: c.User, ExpiresAt: c.SessionExpires})
	if err != nil {
		return nil, err.Error()
	}
	return &principal{hash: hash, kind: kindUser,
		user:    model.User{Email: c.User},
		session: model.Session{ID: c.Session, TokenHash: hash, User: c.User, State: model.SessionLive, ExpiresAt: c.SessionExpires},
		sesVer:  c.SesVer, sesTopic: topic, sesJSON: info, resumed: true, resumeExp: c.Expires}, ""
}

// stillStands reports whether p, the caller a stream last checked, still
// stands without another look: a signed-in user whose session has not
// moved since (a sign-out, a revocation, a new sign-in all touch its
// topic) and has not lapsed. It is the question principalOf's cache asks,
// asked of the stream's own principal: a stream keeps its caller between
// reads, so 10,000 streams woken by one change do not each look it up in
// the shared cache (a lock and a move to the front each), and a caller
// taken from a resume token is not read from the store at the next change,
// which would be the herd the token avoided. Operators and gateways are
// checked in full every time, as their requests are.
func (s *Server) stillStands(p *principal) bool {
	return p.kind == kindUser && p.sesTopic != nil && p.sesTopic.Version() <= p.sesVer && s.now().Before(p.session.ExpiresAt)
}

// What admitResume decided.
const (
	resumeAdmitted = iota
	resumeGone     // ctx ended while queued
	resumeFull     // no turn within resumeMaxWait: check the sign-in in full
)

// admitResume waits for the resume's turn (pacer).
func (s *Server) admitResume(ctx context.Context) int {
	d, ok := s.resumePace.delay(s.clock.Now())
	if !ok {
		return resumeFull
	}
	if d <= 0 {
		return resumeAdmitted
	}
	done := make(chan struct{})
	t := s.clock.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return resumeAdmitted
	case <-ctx.Done():
		return resumeGone
	}
}

// pacer spaces admissions: burst of them at once, then one every every,
// each delayed by up to every more at random; a turn more than maxWait
// away (0: no bound) is not given.
type pacer struct {
	every   time.Duration
	burst   int
	maxWait time.Duration
	rand    func(n int64) int64 // nil: math/rand/v2's

	mu   sync.Mutex
	next time.Time // the earliest free turn
}

// delay takes the next turn and returns how long to wait for it from now;
// ok is false, and no turn taken, when it is more than maxWait away.
func (p *pacer) delay(now time.Time) (d time.Duration, ok bool) {
	p.mu.Lock()
	if floor := now.Add(-time.Duration(max(p.burst-1, 0)) * p.every); p.next.Before(floor) {
		p.next = floor // idle for a while: the burst is available again
	}
	turn := p.next
	if p.maxWait > 0 && turn.Sub(now) > p.maxWait {
		p.mu.Unlock()
		return 0, false
	}
	p.next = p.next.Add(p.every)
	p.mu.Unlock()
	if d = turn.Sub(now); d <= 0 {
		return 0, true
	}
	r := p.rand
	if r == nil {
		r = rand.Int64N
	}
	return d + time.Duration(r(int64(p.every))), true
}
