package server

import (
	"context"
	"net/http"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/hub"
)

// doc is a long-pollable document: its body, the version it reflects (the
// newest version of its topics, read in the same snapshot) and the topics
// whose changes make a new one.
type doc struct {
	body    any
	version uint64
	topics  []*hub.Topic
	final   bool // it will not change again (a finished move): a stream ends after it
}

// recheckEvery is how often a long-poll checks again a caller whose end no
// topic announces (an operator token): a revoked caller stops receiving
// within it.
const recheckEvery = time.Second

// longPoll answers GET ...?since=V&wait=S (docs/internals.md "Push"): at
// once when since is 0, when the document is newer than V, or when V is
// from the future (a client of an older database); otherwise it holds the
// request until one of the document's topics changes, or S passes (then
// answering the current document unchanged).
//
// Every wake checks the caller p again before load reads the document
// (withAuth has just checked it for the first read): a session that ended,
// expired or was revoked answers 401 instead of the document. The wake
// comes from the caller's own topic too (its session's, or for a gateway
// its node's), or, for a caller no topic speaks for, at least every
// recheckEvery, so it stops receiving within a second of its end.
//
// Nothing is missed: a commit after the read is either published before the
// watch is registered (then the hub's version is past the document's, and
// it is read again) or after (then it wakes the watch). The answer carries
// the version read with the document, so re-polling with it repeats nothing.
//
// kind names the document for the metrics (long-polls held by kind); a
// wake is told back to the hub once answered (the fan-out's end).
//
// With ?stream=1 the same document is pushed on one long-lived answer
// instead (serveStream, push.go).
func (s *Server) longPoll(w http.ResponseWriter, r *http.Request, kind string, p *principal, load func(ctx context.Context, p *principal) (doc, *api.Error)) {
	release, e := s.hold(r, kind, p)
	if e != nil {
		writeError(w, e)
		return
	}
	if s.wantsStream(r) {
		s.serveStream(w, r, kind, p, load, release)
		return
	}
	defer release()
	since, wait, e := pollParams(r)
	if e != nil {
		writeError(w, e)
		return
	}
	ctx := r.Context()
	timeout := make(chan struct{})
	if since > 0 {
		t := s.clock.AfterFunc(wait, func() { close(timeout) })
		defer t.Stop()
	}
	timedOut, checked := false, true
	var woke *hub.Watch // the watch whose publish woke this poll, if any
	defer func() {
		if woke != nil {
			woke.Answered() // after the answer below was written
		}
	}()
	for {
		if !checked {
			if p, e = s.principalOf(ctx, p.hash); e != nil {
				writeError(w, e)
				return
			}
		}
		checked = false
		d, e := load(ctx, p)
		if e != nil {
			writeError(w, e)
			return
		}
		if since == 0 || d.version > since || since > s.hub.Global() || timedOut {
			writeJSON(w, http.StatusOK, d.body)
			return
		}
		topics := d.topics // made by this load: appending to it disturbs nothing
		stale := false
		if t := s.callerTopic(p); t != nil {
			topics = append(topics, t)
			// The caller's topic is compared with what the caller's check
			// saw (a session's topic is touched at sign-in, so it is
			// usually newer than the document), the document's with it.
			known := d.version
			if p.kind == kindUser {
				known = max(known, p.sesVer)
			}
			stale = t.Version() > known
		}
		watch := s.hub.Watch(topics...)
		if stale || hub.Newest(d.topics...) > d.version {
			// Published between our read and the registration: read again.
			watch.Stop()
			continue
		}
		var recheck chan struct{}
		var rt clock.Timer
		if s.callerTopic(p) == nil {
			recheck = make(chan struct{})
			rt = s.clock.AfterFunc(recheckEvery, func() { close(recheck) })
		}
		held := s.cfg.Metrics.PollHeld(kind)
		select {
		case <-watch.C():
			if woke != nil {
				woke.Answered() // that wake ended without an answer: waiting again
			}
			woke = watch
		case <-recheck:
		case <-timeout:
			timedOut = true
		case <-s.closeCh:
			timedOut = true // shutting down: answer now, the client re-polls elsewhere
		case <-ctx.Done():
		}
		held()
		watch.Stop()
		if rt != nil {
			rt.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// callerTopic is the topic whose change may end p: its session's for a
// user, its node's for a gateway; nil for an operator token.
func (s *Server) callerTopic(p *principal) *hub.Topic {
	switch p.kind {
	case kindUser:
		return p.sesTopic
	case kindGateway:
		return s.hub.Topic(hub.Gateway(p.node.CID, p.node.NID))
	}
	return nil
}
