package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/reqid"
	"github.com/runos/vpn/control/stream"
)

// wantsStream reports whether r asks for a push stream (?stream=1) and
// this control serves them (Config.NoStreams answers them as long-polls,
// as a control older than streams does).
func (s *Server) wantsStream(r *http.Request) bool {
	return !s.cfg.NoStreams && r.URL.Query().Get(api.ParamStream) == "1"
}

// serveStream is the stream variant of a long-poll (docs/internals.md
// "Push"): the same document, read by the same load, with the same check
// of the caller before every read, written as one event per new version
// on one long-lived answer (control/stream). The first read and its
// refusals answer as a long-poll's do; after that a refusal (the session
// ended or lapsed, the device was revoked, an operator token revoked) is
// the stream's last event.
//
// release gives the stream's place in the caller's allowance back
// (holds.go): when it ends, which on HTTP/1.1 is after Serve returns.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, kind string, p *principal, load func(ctx context.Context, p *principal) (doc, *api.Error), release func()) {
	settled := false
	defer func() {
		if !settled {
			release()
		}
	}()
	since, _, e := pollParams(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if r.URL.Query().Get(api.ParamSince) == "" {
		// An EventSource reconnecting says where it was this way.
		since, _ = strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	}
	ctx := r.Context()
	d, e := load(ctx, p)
	if e != nil {
		writeError(w, e)
		return
	}
	first, err := s.streamDoc(d, p)
	if err != nil {
		writeError(w, s.internal(ctx, "encode stream document", err))
		return
	}
	held := s.cfg.Metrics.StreamHeld(kind)
	o := stream.Options{Event: kind, Since: since, Recheck: s.callerTopic(p) == nil, RequestID: reqid.From(ctx),
		Done:    func() { held(); release() },
		Dropped: func(reason string) { s.cfg.Metrics.StreamDropped(kind, reason) }}
	if kind == api.EventDeviceMap {
		// A device that streams talks to control all the time: its last
		// contact is kept as its long-polls keep it (markSeen writes at
		// most every seenEvery).
		id := r.PathValue("id")
		o.Beat = func() { s.markSeen(context.Background(), id, s.now()) }
		s.issueResume(w, p, id) // before Serve writes the header
	}
	settled = true // Done releases it
	s.streams.Serve(w, r, first, &pollSource{s: s, p: p, load: load}, o)
}

// pollSource is a long-poll's document as a stream's Source.
type pollSource struct {
	s    *Server
	p    *principal // the caller as last checked; only the stream's writer touches it
	load func(ctx context.Context, p *principal) (doc, *api.Error)
}

// Load checks the caller again (a session ended, lapsed or revoked
// answers its 401) and reads the document, as a long-poll's every wake.
// The check is stillStands while the caller's session has not moved, the
// full principalOf otherwise.
func (ps *pollSource) Load(ctx context.Context) (stream.Doc, error) {
	p := ps.p
	if !ps.s.stillStands(p) {
		var e *api.Error
		if p, e = ps.s.principalOf(ctx, ps.p.hash); e != nil {
			return stream.Doc{}, e
		}
		ps.p = p
	}
	d, e := ps.load(ctx, p)
	if e != nil {
		return stream.Doc{}, e
	}
	sd, err := ps.s.streamDoc(d, p)
	if err != nil {
		return stream.Doc{}, ps.s.internal(ctx, "encode stream document", err)
	}
	return sd, nil
}

// streamDoc is d as a stream writes it: the caller's own topic follows
// too (its end ends the stream), and what the caller's check saw of it
// counts as known (a sign-in touches its session's topic).
func (s *Server) streamDoc(d doc, p *principal) (stream.Doc, error) {
	sd := stream.Doc{Version: d.version, Known: d.version, Topics: d.topics, Final: d.final}
	if t := s.callerTopic(p); t != nil && !containsTopic(d.topics, t) {
		sd.Topics = append(d.topics, t) // made by this load: appending disturbs nothing
		if p.kind == kindUser {
			sd.Known = max(sd.Known, p.sesVer)
		}
	}
	if a, ok := d.body.(jsonAppender); ok {
		sd.Append = a.appendJSON
		return sd, nil
	}
	data, err := json.Marshal(d.body)
	if err != nil {
		return sd, err
	}
	sd.Append = func(b []byte) []byte { return append(b, data...) }
	return sd, nil
}

func containsTopic(ts []*hub.Topic, t *hub.Topic) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}
