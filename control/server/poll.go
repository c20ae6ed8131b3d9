package server

import (
	"context"
	"net/http"

	"github.com/runos/vpn/control/api"
	"github.com/runos/vpn/control/hub"
)

// doc is a long-pollable document: its body, the version it reflects (the
// newest version of its topics, read in the same snapshot) and the topics
// whose changes make a new one.
type doc struct {
	body    any
	version uint64
	topics  []*hub.Topic
}

// longPoll answers GET ...?since=V&wait=S (docs/internals.md "Push"): at
// once when since is 0, when the document is newer than V, or when V is
// from the future (a client of an older database); otherwise it holds the
// request until one of the document's topics changes, or S passes (then
// answering the current document unchanged). load runs again after every
// wake, so it also re-checks the caller (an expired session answers 401).
//
// Nothing is missed: a commit after the read is either published before the
// watch is registered (then the hub's version is past the document's, and
// it is read again) or after (then it wakes the watch). The answer carries
// the version read with the document, so re-polling with it repeats nothing.
//
// kind names the document for the metrics (long-polls held by kind); a
// wake is told back to the hub once answered (the fan-out's end).
func (s *Server) longPoll(w http.ResponseWriter, r *http.Request, kind string, load func(ctx context.Context) (doc, *api.Error)) {
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
	timedOut := false
	var woke *hub.Watch // the watch whose publish woke this poll, if any
	defer func() {
		if woke != nil {
			woke.Answered() // after the answer below was written
		}
	}()
	for {
		d, e := load(ctx)
		if e != nil {
			writeError(w, e)
			return
		}
		if since == 0 || d.version > since || since > s.hub.Global() || timedOut {
			writeJSON(w, http.StatusOK, d.body)
			return
		}
		watch := s.hub.Watch(d.topics...)
		if hub.Newest(d.topics...) > d.version {
			// Published between our read and the registration: read again.
			watch.Stop()
			continue
		}
		held := s.cfg.Metrics.PollHeld(kind)
		select {
		case <-watch.C():
			if woke != nil {
				woke.Answered() // that wake ended without an answer: waiting again
			}
			woke = watch
		case <-timeout:
			timedOut = true
		case <-s.closeCh:
			timedOut = true // shutting down: answer now, the client re-polls elsewhere
		case <-ctx.Done():
			held()
			watch.Stop()
			return
		}
		held()
		watch.Stop()
	}
}
