package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// fakeDaemon is a local API server on a temporary unix socket speaking the
// real localapi types, with just enough behaviour for the commands:
// sessions, connects that reach peerUp (or not), restored clusters after
// a sign-in, and the watch stream.
type fakeDaemon struct {
	t      testing.TB
	socket string

	mu      sync.Mutex
	st      localapi.Status
	changed chan struct{} // closed and replaced on every change
	calls   []string

	// Behaviour, set by tests before running commands.
	noHandshake  map[string]bool       // these clusters never reach peerUp
	connectErr   map[string]*api.Error // Connect answers this error
	clusterErr   map[string]string     // error shown while connecting
	restoreOnSet []string              // clusters the daemon reconnects after SetSession
	version      localapi.Version
	devices      []api.DeviceDetail // the user's devices, as control would list them
	// dieOn: these calls ("connect", "disconnect", "end session") are
	// taken, then the connection drops, as when the daemon is killed.
	dieOn map[string]bool
	// afterDisconnect and afterEnd change the status a disconnect or an
	// end of session leaves (a change pending at control, say).
	afterDisconnect, afterEnd func(st *localapi.Status)
}

func newFakeDaemon(t testing.TB) *fakeDaemon {
	t.Helper()
	// Unix socket paths are short (108 bytes); t.TempDir can be longer.
	dir, err := os.MkdirTemp("", "rcli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &fakeDaemon{
		t:           t,
		socket:      filepath.Join(dir, "vpnd.sock"),
		changed:     make(chan struct{}),
		noHandshake: map[string]bool{},
		connectErr:  map[string]*api.Error{},
		clusterErr:  map[string]string{},
		dieOn:       map[string]bool{},
		version:     localapi.Version{Version: "dev", Commit: "unknown", Date: "unknown"},
	}
	d.st = localapi.Status{
		Seq:     1,
		Version: "dev",
		Session: localapi.Session{State: localapi.SessionSignedOut},
		Tunnel:  localapi.Tunnel{Interface: "wg1"},
		DNS:     localapi.DNS{Mode: "off"},
	}
	l, err := net.Listen("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", d.handleStatus)
	mux.HandleFunc("GET /v1/watch", d.handleWatch)
	mux.HandleFunc("POST /v1/session", d.handleSetSession)
	mux.HandleFunc("DELETE /v1/session", d.handleEndSession)
	mux.HandleFunc("POST /v1/connect", d.handleConnect)
	mux.HandleFunc("POST /v1/disconnect", d.handleDisconnect)
	mux.HandleFunc("GET /v1/devices", func(w http.ResponseWriter, r *http.Request) {
		d.record("devices")
		d.mu.Lock()
		defer d.mu.Unlock()
		writeJSON(w, 200, d.devices)
	})
	mux.HandleFunc("DELETE /v1/devices/{id}", func(w http.ResponseWriter, r *http.Request) {
		d.record("remove " + r.PathValue("id"))
		d.mu.Lock()
		defer d.mu.Unlock()
		d.devices = slices.DeleteFunc(d.devices, func(x api.DeviceDetail) bool { return x.ID == r.PathValue("id") })
		writeJSON(w, 200, d.st)
	})
	mux.HandleFunc("GET /v1/version", func(w http.ResponseWriter, r *http.Request) {
		d.record("version")
		writeJSON(w, 200, d.version)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
	})
	return d
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, e *api.Error) {
	writeJSON(w, e.Status, api.ErrorBody{Error: e})
}

func (d *fakeDaemon) record(call string) {
	d.mu.Lock()
	d.calls = append(d.calls, call)
	die := d.dieOn[call] || d.dieOn[strings.Fields(call)[0]]
	d.mu.Unlock()
	if die {
		panic(http.ErrAbortHandler) // the connection drops mid-call
	}
}

// Calls returns the state-changing calls seen so far.
func (d *fakeDaemon) Calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// update changes the status under the lock and wakes the watchers.
func (d *fakeDaemon) update(fn func(st *localapi.Status)) {
	d.mu.Lock()
	fn(&d.st)
	d.st.Seq++
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

func (d *fakeDaemon) snapshot() (localapi.Status, chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.st
	st.Clusters = slices.Clone(d.st.Clusters)
	return st, d.changed
}

// Set replaces the status (for tests that stage a state).
func (d *fakeDaemon) Set(fn func(st *localapi.Status)) { d.update(fn) }

func (d *fakeDaemon) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, _ := d.snapshot()
	writeJSON(w, 200, st)
}

func (d *fakeDaemon) handleWatch(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	fl := w.(http.Flusher)
	enc := json.NewEncoder(w)
	for {
		st, ch := d.snapshot()
		if err := enc.Encode(st); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-ch:
		}
	}
}

func (d *fakeDaemon) handleSetSession(w http.ResponseWriter, r *http.Request) {
	var req localapi.SessionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.AccessToken == "" || req.APIURL == "" {
		writeErr(w, &api.Error{Status: 400, Code: localapi.CodeInvalid, Message: "bad session request"})
		return
	}
	d.record("session " + req.User + " " + req.APIURL)
	d.update(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedIn, User: req.User, ExpiresAt: req.ExpiresAt, APIURL: req.APIURL, DeviceID: "dev1"}
		st.Tunnel.Up = true
		st.Tunnel.Addresses = []string{"100.96.0.2/32"}
		for _, cid := range d.restoreOnSet {
			st.Clusters = append(st.Clusters, d.connecting(cid))
		}
	})
	for _, cid := range d.restoreOnSet {
		d.handshakeLater(cid)
	}
	st, _ := d.snapshot()
	writeJSON(w, 200, st)
}

func (d *fakeDaemon) handleEndSession(w http.ResponseWriter, r *http.Request) {
	d.record("end session")
	d.update(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedOut}
		st.Clusters = nil
		st.Tunnel.Up = false
		if d.afterEnd != nil {
			d.afterEnd(st)
		}
	})
	st, _ := d.snapshot()
	writeJSON(w, 200, st)
}

func (d *fakeDaemon) connecting(cid string) localapi.ClusterStatus {
	return localapi.ClusterStatus{
		CID: cid, Name: "tc-" + cid, State: localapi.ClusterConnecting, Wanted: true,
		Server: localapi.Server{NodeID: "n1", Endpoint: "10.77.0.21:32768", PublicKey: "srvkey=", Address: "100.100.1.1"},
		Subnet: "100.100.1.0/24",
		DNS:    localapi.ClusterDNS{Server: "100.100.1.1", Domains: []string{cid + ".rjwrn.example.com"}},
		Error:  d.clusterErr[cid],
	}
}

// handshakeLater brings cid's peer up shortly, as a real handshake would.
func (d *fakeDaemon) handshakeLater(cid string) {
	d.mu.Lock()
	never := d.noHandshake[cid]
	d.mu.Unlock()
	if never {
		return
	}
	time.AfterFunc(20*time.Millisecond, func() {
		d.update(func(st *localapi.Status) {
			for i := range st.Clusters {
				if st.Clusters[i].CID == cid && st.Clusters[i].Wanted {
					st.Clusters[i].State = localapi.ClusterConnected
					st.Clusters[i].PeerUp = true
					st.Clusters[i].LastHandshake = time.Now()
				}
			}
		})
	})
}

func (d *fakeDaemon) handleConnect(w http.ResponseWriter, r *http.Request) {
	var req localapi.ConnectRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, &api.Error{Status: 400, Code: localapi.CodeInvalid, Message: "bad request"})
		return
	}
	d.record("connect " + req.CID)
	st, _ := d.snapshot()
	if st.Session.State != localapi.SessionSignedIn {
		writeErr(w, &api.Error{Status: 409, Code: localapi.CodeSignedOut, Message: "not signed in", Hint: "run `runos vpn up`"})
		return
	}
	if e := d.connectErr[req.CID]; e != nil {
		writeErr(w, e)
		return
	}
	d.update(func(st *localapi.Status) {
		st.Clusters = slices.DeleteFunc(st.Clusters, func(c localapi.ClusterStatus) bool { return c.CID == req.CID })
		st.Clusters = append(st.Clusters, d.connecting(req.CID))
	})
	d.handshakeLater(req.CID)
	st, _ = d.snapshot()
	writeJSON(w, 200, st)
}

func (d *fakeDaemon) handleDisconnect(w http.ResponseWriter, r *http.Request) {
	var req localapi.ConnectRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, &api.Error{Status: 400, Code: localapi.CodeInvalid, Message: "bad request"})
		return
	}
	d.record("disconnect " + req.CID)
	found := false
	d.update(func(st *localapi.Status) {
		n := len(st.Clusters)
		st.Clusters = slices.DeleteFunc(st.Clusters, func(c localapi.ClusterStatus) bool { return c.CID == req.CID })
		found = len(st.Clusters) != n
		if found && d.afterDisconnect != nil {
			d.afterDisconnect(st)
		}
	})
	if !found {
		writeErr(w, &api.Error{Status: 404, Code: localapi.CodeNotFound, Message: fmt.Sprintf("%s is not connected", req.CID)})
		return
	}
	st, _ := d.snapshot()
	writeJSON(w, 200, st)
}
