package vpnd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/httpjson"
	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/logring"
)

const maxBody = 64 << 10 // a session or a cid: far below this

type callerKey struct{}

// server is the local API over the daemon's socket.
type server struct {
	d      *daemon
	policy access.Policy
	done   <-chan struct{} // closes every watch stream when the daemon stops
	logs   *logring.Ring   // the daemon's recent log; nil: not kept
}

// connContext reads the caller's kernel-verified identity once per
// connection; the decision is per request.
func connContext(ctx context.Context, c net.Conn) context.Context {
	cred, err := platform.PeerCredOf(c)
	return context.WithValue(ctx, callerKey{}, access.Caller{Cred: cred, Err: err})
}

// handler is the local API: each route a method below, every request
// first through guard.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/logs", s.showLogs)
	mux.HandleFunc("GET /v1/debug/pprof/{profile}", s.profile)
	mux.HandleFunc("POST /v1/probe", s.probe)
	mux.HandleFunc("GET /v1/version", s.version)
	mux.HandleFunc("GET /v1/watch", s.watch)
	mux.HandleFunc("POST /v1/session", s.setSession)
	mux.HandleFunc("DELETE /v1/session", s.endSession)
	mux.HandleFunc("POST /v1/connect", s.connect)
	mux.HandleFunc("POST /v1/disconnect", s.disconnect)
	mux.HandleFunc("GET /v1/devices", s.devices)
	mux.HandleFunc("DELETE /v1/devices/{id}", s.removeDevice)
	mux.HandleFunc("/", s.noRoute)
	return s.guard(mux)
}

// guard refuses what the caller may not do before any route runs, and
// bounds every request's body.
func (s *server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ref := s.policy.Check(r, callerOf(r)); ref != nil {
			writeErr(w, refusal(ref))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

// refusal is the access policy's refusal as the API's error.
func refusal(ref *access.Refusal) *apiError {
	return &apiError{status: ref.Status, e: api.Error{Code: ref.Code, Message: ref.Message, Hint: ref.Hint}}
}

func (s *server) status(w http.ResponseWriter, r *http.Request) {
	st := s.forCaller(s.d.Status(), r)
	st.Metrics = s.d.metrics()
	writeJSON(w, st)
}

func (s *server) showLogs(w http.ResponseWriter, r *http.Request) {
	// The log names users, devices and addresses: for those who may
	// steer the daemon, like the log file the service keeps.
	if d := s.policy.Decide(callerOf(r)); !d.Control {
		writeErr(w, errf(http.StatusForbidden, localapi.CodeForbidden, d.Hint, "the daemon's log is for those who may steer it: %s", d.Reason))
		return
	}
	writeJSON(w, logs(s.logs))
}

// profile writes one of the Go runtime's profiles (heap, allocs,
// goroutine, …) as pprof's format, or as text with ?debug=1: how the
// daemon's memory was found across connects (docs/performance.md). Like
// the log it names what the daemon holds, so it is for those who may steer
// it. It is runtime/pprof's WriteTo rather than net/http/pprof, whose
// import registers its handlers on http.DefaultServeMux, and whose
// refusals of a bad name or debug value are not this API's JSON errors.
func (s *server) profile(w http.ResponseWriter, r *http.Request) {
	if d := s.policy.Decide(callerOf(r)); !d.Control {
		writeErr(w, errf(http.StatusForbidden, localapi.CodeForbidden, d.Hint, "the daemon's profiles are for those who may steer it: %s", d.Reason))
		return
	}
	name := r.PathValue("profile")
	p := pprof.Lookup(name)
	if p == nil {
		badRequest(w, fmt.Errorf("no profile %q: want one of %s", name, profileNames()))
		return
	}
	debug := 0
	if v := r.URL.Query().Get("debug"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 2 {
			badRequest(w, fmt.Errorf("debug=%q: want 0 (pprof's format), 1 or 2 (text)", v))
			return
		}
		debug = n
	}
	if name == "heap" && r.URL.Query().Get("gc") == "1" {
		runtime.GC()
	}
	if debug > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	_ = p.WriteTo(w, debug)
}

// profileNames lists the runtime's profiles for an error message.
func profileNames() string {
	var names []string
	for _, p := range pprof.Profiles() {
		names = append(names, p.Name())
	}
	return strings.Join(names, ", ")
}

func (s *server) probe(w http.ResponseWriter, r *http.Request) {
	var req localapi.ProbeRequest
	err := decodeBody(r.Body, &req)
	if err == nil {
		err = api.CheckCID(req.CID)
	}
	if err != nil {
		badRequest(w, err)
		return
	}
	res, aerr := s.d.probe(r.Context(), req)
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	writeJSON(w, res)
}

func (s *server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, localapi.Version{Version: version.Version, Commit: version.Commit, Date: version.Date})
}

func (s *server) setSession(w http.ResponseWriter, r *http.Request) {
	req, err := parseSessionRequest(r.Body, s.d.allowHTTP)
	if err != nil {
		badRequest(w, err)
		return
	}
	var refuse func(from, to string) *apiError // nil: the caller may change control
	if !s.policy.Decide(callerOf(r)).ChangeControl {
		refuse = func(from, to string) *apiError {
			return refusal(s.policy.ChangeControlRefusal(from, to))
		}
	}
	s.answer(w, r)(s.d.setSession(r.Context(), req, refuse))
}

func (s *server) endSession(w http.ResponseWriter, r *http.Request) {
	s.answer(w, r)(s.d.endSession(r.Context()))
}

// connect joins the cluster, recording the CLI's default cluster when the
// request names one (issue 21).
func (s *server) connect(w http.ResponseWriter, r *http.Request) {
	req, err := parseConnectRequest(r.Body)
	if err == nil && req.Default != "" {
		if e := api.CheckCID(req.Default); e != nil {
			err = fmt.Errorf("default: %w", e)
		}
	}
	if err != nil {
		badRequest(w, err)
		return
	}
	s.answer(w, r)(s.d.connectAs(r.Context(), req.CID, req.Default))
}

func (s *server) disconnect(w http.ResponseWriter, r *http.Request) {
	s.onCluster(w, r, s.d.disconnect)
}

// onCluster does act on the cluster the request names, and answers with
// the status after it.
func (s *server) onCluster(w http.ResponseWriter, r *http.Request, act func(ctx context.Context, cid string) (localapi.Status, *apiError)) {
	req, err := parseConnectRequest(r.Body)
	if err != nil {
		badRequest(w, err)
		return
	}
	s.answer(w, r)(act(r.Context(), req.CID))
}

func (s *server) devices(w http.ResponseWriter, r *http.Request) {
	ds, aerr := s.d.myDevices(r.Context())
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	writeJSON(w, ds)
}

func (s *server) removeDevice(w http.ResponseWriter, r *http.Request) {
	s.answer(w, r)(s.d.removeDevice(r.Context(), r.PathValue("id")))
}

func (s *server) noRoute(w http.ResponseWriter, r *http.Request) {
	writeErr(w, errf(http.StatusNotFound, localapi.CodeNotFound, "see the routes in vpnd/localapi", "no route %s %s", r.Method, r.URL.Path))
}

// callerOf is who sent r: the kernel's word, read once per connection.
func callerOf(r *http.Request) access.Caller {
	if c, ok := r.Context().Value(callerKey{}).(access.Caller); ok {
		return c
	}
	return access.Caller{Cred: platform.PeerCred{UID: -1, GID: -1}, Err: errors.New("no peer credentials")}
}

// forCaller is st as the sender of r sees it: with what it may do, by the
// rule that refuses its changes (decided now, so a new operator record
// shows on the next status).
func (s *server) forCaller(st localapi.Status, r *http.Request) localapi.Status {
	d := s.policy.Decide(callerOf(r))
	st.Access = &localapi.Access{Control: d.Control, ChangeControl: d.ChangeControl, Reason: d.Reason, Hint: d.Hint}
	return st
}

// answer writes a status or the error an action returned.
func (s *server) answer(w http.ResponseWriter, r *http.Request) func(localapi.Status, *apiError) {
	return func(st localapi.Status, err *apiError) {
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, s.forCaller(st, r))
	}
}

// watch streams the status as NDJSON: the current one first, then one per
// change, each flushed; a slow reader only ever gets the latest.
func (s *server) watch(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, errf(http.StatusInternalServerError, "internal", "", "streaming unsupported"))
		return
	}
	wt, stop := s.d.watch()
	defer stop()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	enc := json.NewEncoder(w)
	rc := http.NewResponseController(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-wt.ready:
		}
		st := wt.take()
		if st == nil {
			continue
		}
		// A reader that stops reading entirely is cut off instead of
		// holding a goroutine and a connection forever.
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if enc.Encode(s.forCaller(*st, r)) != nil {
			return
		}
		fl.Flush()
	}
}

// badRequest answers that the request itself is wrong, and why.
func badRequest(w http.ResponseWriter, err error) {
	writeErr(w, errf(http.StatusBadRequest, localapi.CodeInvalid, "", "%v", err))
}

// writeJSON answers 200 with v, or 500 if v cannot be encoded.
func writeJSON(w http.ResponseWriter, v any) {
	if err := httpjson.Write(w, http.StatusOK, v); err != nil {
		writeErr(w, errf(http.StatusInternalServerError, "internal", "", "the answer could not be encoded: %v", err))
	}
}

func writeErr(w http.ResponseWriter, e *apiError) {
	_ = httpjson.Write(w, e.status, api.ErrorBody{Error: &e.e}) // strings and a time: they encode
}

// decodeBody reads one JSON object and nothing after it. Unknown fields
// are ignored, so an older daemon still serves a newer CLI.
func decodeBody(r io.Reader, v any) error {
	b, err := io.ReadAll(r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("request body over %d bytes", mbe.Limit)
		}
		return fmt.Errorf("read request: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("missing JSON body")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad JSON body: %v", err)
	}
	if dec.More() {
		return errors.New("bad JSON body: more than one value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("bad JSON body: trailing data")
	}
	return nil
}

// parseSessionRequest checks a session handed over before anything uses
// it: an http:// control only when the daemon was started allowing it.
func parseSessionRequest(r io.Reader, allowHTTP bool) (localapi.SessionRequest, error) {
	var req localapi.SessionRequest
	if err := decodeBody(r, &req); err != nil {
		return req, err
	}
	u, err := api.ParseControlURL(req.APIURL, allowHTTP)
	if errors.Is(err, api.ErrPlainHTTP) {
		return req, fmt.Errorf("apiUrl: %w; this daemon was not started with --%s", err, api.FlagInsecureHTTP)
	}
	if err != nil {
		return req, fmt.Errorf("apiUrl: %w", err)
	}
	req.APIURL = u
	if req.AccessToken == "" {
		return req, errors.New("accessToken is missing")
	}
	if len(req.AccessToken) > 4096 || strings.ContainsFunc(req.AccessToken, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return req, errors.New("accessToken is malformed")
	}
	return req, nil
}

// parseConnectRequest checks the cid before any request is made.
func parseConnectRequest(r io.Reader) (localapi.ConnectRequest, error) {
	var req localapi.ConnectRequest
	if err := decodeBody(r, &req); err != nil {
		return req, err
	}
	if err := api.CheckCID(req.CID); err != nil {
		return req, err
	}
	return req, nil
}
