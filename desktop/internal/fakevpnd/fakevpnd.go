// Package fakevpnd is a stand-in for `runos vpnd` in RunOS Desktop's
// tests: the real local API routes and wire types (vpnd/localapi) over a
// real unix socket, with state a test can set and every request recorded.
// It is not the daemon: no tunnel, no control; a connect "handshakes" after
// a short delay unless told otherwise. What a client sees of the session
// is the real daemon's, though: a new session forgets the cluster list
// (keeping, for the same user again, the clusters they wanted, which come
// back by themselves) and lists the account's clusters a moment later;
// ending the session forgets the clusters, the wanted ones and control's
// URL.
package fakevpnd

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runos/vpn/api"
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
	noAccess  bool                     // an older daemon: statuses say nothing of access
	handshake time.Duration            // from a connect (or a session) to "connected" (and the account's clusters listed)
	peerUp    bool                     // whether "connected" comes with a handshake
	account   []localapi.ClusterStatus // the account's clusters at control (CID, Name)
	session   int                      // counts sessions begun and ended, so a late timer does nothing
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
	d.st.Clusters = slices.Clone(st.Clusters)
	d.setAccountLocked(st.Clusters)
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

// SetAccount sets the account's clusters at control: those a session lists
// a moment after it begins, and those connect accepts. By default they are
// the clusters of the status Start was given.
func (d *Daemon) SetAccount(cs ...localapi.ClusterStatus) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setAccountLocked(cs)
}

func (d *Daemon) setAccountLocked(cs []localapi.ClusterStatus) {
	d.account = nil
	for _, c := range cs {
		d.account = append(d.account, localapi.ClusterStatus{CID: c.CID, Name: c.Name, State: localapi.ClusterDisconnected})
	}
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

// setSession is the real daemon's: control's URL and the user recorded,
// the cluster list forgotten; the same user again (same control) gets the
// clusters they wanted back, connecting, then connected a moment later when
// the account's clusters are listed too.
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
	user := req.User
	if user == "" {
		user = "ana@example.com" // control's answer to the token
	}
	d.session++
	session := d.session
	var restored []string
	d.updateLocked(func(st *localapi.Status) {
		prev := st.Session
		same := prev.State != localapi.SessionSignedOut && prev.APIURL == req.APIURL && prev.User == user
		cs := []localapi.ClusterStatus{}
		for _, c := range st.Clusters {
			if c.Wanted && same {
				cs = append(cs, localapi.ClusterStatus{CID: c.CID, Name: c.Name, Wanted: true, State: localapi.ClusterConnecting})
				restored = append(restored, c.CID)
			}
		}
		st.Clusters = cs
		st.Session = localapi.Session{State: localapi.SessionSignedIn, User: user, ExpiresAt: req.ExpiresAt, APIURL: req.APIURL, DeviceID: "dev1"}
	})
	up := d.peerUp
	time.AfterFunc(d.handshake, func() { d.synced(session, restored, up) })
	writeJSON(w, http.StatusOK, d.servedLocked())
}

// synced is the session's first round with control: the account's
// clusters listed, the restored ones joined and handshaking.
func (d *Daemon) synced(session int, restored []string, up bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.session != session {
		return // the session ended (or another began) meanwhile
	}
	d.updateLocked(func(st *localapi.Status) {
		for _, a := range d.account {
			if !slices.ContainsFunc(st.Clusters, func(c localapi.ClusterStatus) bool { return c.CID == a.CID }) {
				st.Clusters = append(st.Clusters, a)
			}
		}
		slices.SortFunc(st.Clusters, func(a, b localapi.ClusterStatus) int { return strings.Compare(a.CID, b.CID) })
		for i := range st.Clusters {
			if c := &st.Clusters[i]; c.Wanted && slices.Contains(restored, c.CID) {
				c.Server = localapi.Server{NodeID: "n1", Endpoint: "198.51.100.21:32768", Address: "100.100.1.1"}
				c.State, c.PeerUp = localapi.ClusterConnected, up
				if up {
					c.LastHandshake = time.Now()
				}
			}
		}
	})
}

// endSession is the real daemon's `vpn down`: signed out, and the clusters,
// the wanted ones and control's URL forgotten.
func (d *Daemon) endSession(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.change(w, Call{Method: r.Method, Path: r.URL.Path}) {
		return
	}
	d.session++
	d.updateLocked(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedOut}
		st.Clusters = []localapi.ClusterStatus{}
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
	if i < 0 && !on {
		writeJSON(w, http.StatusOK, d.servedLocked()) // nothing to disconnect, as the real daemon answers
		return
	}
	if i < 0 {
		// Not listed (yet): control knows the account's clusters.
		j := slices.IndexFunc(d.account, func(c localapi.ClusterStatus) bool { return c.CID == req.CID })
		if j < 0 {
			writeErr(w, http.StatusNotFound, api.Error{Code: localapi.CodeNotFound, Message: "no cluster " + req.CID + " on your account"})
			return
		}
		d.st.Clusters = append(d.st.Clusters, d.account[j])
		i = len(d.st.Clusters) - 1
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
