// Package fakevpnd is a stand-in for `runos vpnd` in RunOS Desktop's
// tests: the real local API routes and wire types (vpnd/localapi) over a
// real unix socket, with state a test can set and every request recorded.
// It is not the daemon: no tunnel, no control; a connect "handshakes" after
// a short delay unless told otherwise.
package fakevpnd

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/runos/vpn/control/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// Call is one request the daemon received.
type Call struct {
	Method, Path string
	CID          string                   // connect, disconnect
	Session      *localapi.SessionRequest // POST /v1/session
}

func (c Call) String() string {
	if c.CID != "" {
		return c.Method + " " + c.Path + " " + c.CID
	}
	return c.Method + " " + c.Path
}

// Daemon serves the local API on a unix socket.
type Daemon struct {
	Socket string

	mu        sync.Mutex
	st        localapi.Status
	calls     []Call
	changed   chan struct{} // closed and replaced on every change
	readOnly  bool
	noAccess  bool          // an older daemon: statuses say nothing of access
	handshake time.Duration // from a connect to "connected"
	peerUp    bool          // whether "connected" comes with a handshake
	l         net.Listener
	srv       *http.Server
}

// Start serves on socket with the given initial status (Seq is managed).
func Start(socket string, st localapi.Status) (*Daemon, error) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	d := &Daemon{Socket: socket, st: st, changed: make(chan struct{}), handshake: 30 * time.Millisecond, peerUp: true, l: l}
	d.st.Seq = 1
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", d.status)
	mux.HandleFunc("GET /v1/watch", d.watch)
	mux.HandleFunc("POST /v1/session", d.setSession)
	mux.HandleFunc("DELETE /v1/session", d.endSession)
	mux.HandleFunc("POST /v1/connect", d.connect)
	mux.HandleFunc("POST /v1/disconnect", d.disconnect)
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = d.srv.Serve(l) }()
	return d, nil
}

// Close stops serving and ends every watch stream, as a daemon exiting does.
func (d *Daemon) Close() {
	_ = d.srv.Close()
}

// SetReadOnly makes every change answer 403 forbidden and every status
// say so (Access), as for a user who may only read. Watchers get a new
// status at once.
func (d *Daemon) SetReadOnly(ro bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readOnly = ro
	d.updateLocked(func(*localapi.Status) {})
}

// SetNoAccess makes statuses carry no Access, as a daemon older than the
// field: only a refusal then tells the user may only read.
func (d *Daemon) SetNoAccess(no bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.noAccess = no
	d.updateLocked(func(*localapi.Status) {})
}

// SetHandshake sets how long after a connect the cluster is connected, and
// whether with a handshake (peerUp) or without (the server never answers).
func (d *Daemon) SetHandshake(after time.Duration, peerUp bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.handshake, d.peerUp = after, peerUp
}

// Update changes the status and tells every watcher.
func (d *Daemon) Update(fn func(*localapi.Status)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.updateLocked(fn)
}

func (d *Daemon) updateLocked(fn func(*localapi.Status)) {
	fn(&d.st)
	d.st.Seq++
	close(d.changed)
	d.changed = make(chan struct{})
}

// Status returns a copy of the current status.
func (d *Daemon) Status() localapi.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return clone(d.st)
}

// Calls returns the state-changing requests received so far, in order.
func (d *Daemon) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// Refusal words, as the real daemon's (vpnd/access).
const (
	readOnlyReason = "you may only read the VPN status: changing it is for root, the operator recorded at install and members of the runos group"
	readOnlyHint   = "ask an administrator to run: sudo runos vpn install --operator $USER"
)

// servedLocked is the status as a caller gets it: with its access, as the
// real daemon decides it per request.
func (d *Daemon) servedLocked() localapi.Status {
	st := clone(d.st)
	switch {
	case d.noAccess:
	case d.readOnly:
		st.Access = &localapi.Access{Reason: readOnlyReason, Hint: readOnlyHint}
	default:
		st.Access = &localapi.Access{Control: true, Reason: "root and may change the VPN state"}
	}
	return st
}

func clone(st localapi.Status) localapi.Status {
	st.Clusters = slices.Clone(st.Clusters)
	st.Warnings = slices.Clone(st.Warnings)
	return st
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, e api.Error) {
	writeJSON(w, code, api.ErrorBody{Error: &e})
}

func (d *Daemon) status(w http.ResponseWriter, _ *http.Request) {
	d.mu.Lock()
	st := d.servedLocked()
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
}

func (d *Daemon) watch(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, http.StatusInternalServerError, api.Error{Code: "internal", Message: "no flusher"})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	var last uint64
	for {
		d.mu.Lock()
		st, ch := d.servedLocked(), d.changed
		d.mu.Unlock()
		if st.Seq != last {
			if enc.Encode(st) != nil {
				return
			}
			fl.Flush()
			last = st.Seq
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
}

// change records the call and refuses it for a read-only caller.
func (d *Daemon) change(w http.ResponseWriter, c Call) bool {
	d.calls = append(d.calls, c)
	if d.readOnly {
		writeErr(w, http.StatusForbidden, api.Error{Code: localapi.CodeForbidden, Message: readOnlyReason, Hint: readOnlyHint})
		return false
	}
	return true
}

func (d *Daemon) setSession(w http.ResponseWriter, r *http.Request) {
	var req localapi.SessionRequest
	err := json.NewDecoder(r.Body).Decode(&req)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.change(w, Call{Method: r.Method, Path: r.URL.Path, Session: &req}) {
		return
	}
	if err != nil || req.AccessToken == "" || req.APIURL == "" {
		writeErr(w, http.StatusBadRequest, api.Error{Code: localapi.CodeInvalid, Message: "want apiUrl and accessToken"})
		return
	}
	d.updateLocked(func(st *localapi.Status) {
		user := req.User
		if user == "" {
			user = "ana@example.com"
		}
		st.Session = localapi.Session{State: localapi.SessionSignedIn, User: user, ExpiresAt: req.ExpiresAt, APIURL: req.APIURL, DeviceID: "dev1"}
	})
	writeJSON(w, http.StatusOK, d.servedLocked())
}

func (d *Daemon) endSession(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.change(w, Call{Method: r.Method, Path: r.URL.Path}) {
		return
	}
	d.updateLocked(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedOut, APIURL: st.Session.APIURL}
		for i := range st.Clusters {
			st.Clusters[i] = localapi.ClusterStatus{CID: st.Clusters[i].CID, Name: st.Clusters[i].Name, State: localapi.ClusterDisconnected}
		}
	})
	writeJSON(w, http.StatusOK, d.servedLocked())
}

func (d *Daemon) connect(w http.ResponseWriter, r *http.Request) {
	d.join(w, r, true)
}

func (d *Daemon) disconnect(w http.ResponseWriter, r *http.Request) {
	d.join(w, r, false)
}

func (d *Daemon) join(w http.ResponseWriter, r *http.Request, on bool) {
	var req localapi.ConnectRequest
	err := json.NewDecoder(r.Body).Decode(&req)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.change(w, Call{Method: r.Method, Path: r.URL.Path, CID: req.CID}) {
		return
	}
	if err != nil || api.CheckCID(req.CID) != nil {
		writeErr(w, http.StatusBadRequest, api.Error{Code: localapi.CodeInvalid, Message: fmt.Sprintf("invalid cid %q", req.CID)})
		return
	}
	if on && d.st.Session.State != localapi.SessionSignedIn {
		writeErr(w, http.StatusConflict, api.Error{Code: localapi.CodeSignedOut, Message: "not signed in", Hint: "run: runos vpn up"})
		return
	}
	i := slices.IndexFunc(d.st.Clusters, func(c localapi.ClusterStatus) bool { return c.CID == req.CID })
	if i < 0 {
		writeErr(w, http.StatusNotFound, api.Error{Code: localapi.CodeNotFound, Message: "no cluster " + req.CID + " on your account"})
		return
	}
	d.updateLocked(func(st *localapi.Status) {
		c := &st.Clusters[i]
		c.Wanted, c.PeerUp, c.Error = on, false, ""
		c.State = localapi.ClusterDisconnected
		if on {
			c.State = localapi.ClusterConnecting
			c.Server = localapi.Server{NodeID: "n1", Endpoint: "198.51.100.21:32768", Address: "100.100.1.1"}
		}
	})
	if on {
		cid, up := req.CID, d.peerUp
		time.AfterFunc(d.handshake, func() { d.handshaked(cid, up) })
	}
	writeJSON(w, http.StatusOK, d.servedLocked())
}

func (d *Daemon) handshaked(cid string, up bool) {
	d.Update(func(st *localapi.Status) {
		for i := range st.Clusters {
			if c := &st.Clusters[i]; c.CID == cid && c.Wanted {
				c.State, c.PeerUp = localapi.ClusterConnected, up
				if up {
					c.LastHandshake = time.Now()
				}
			}
		}
	})
}
