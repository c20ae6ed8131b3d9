// Package fakecontrol is a small runos-control for the daemon's tests: the
// routes a device uses (/v1/me, /v1/sessions/current, /v1/clusters,
// /v1/devices, joins and leaves, the device map's stream and long-poll), speaking the
// real api types over real HTTPS, with knobs a test turns: add
// sessions and clusters, move a cluster's VPN server, expire a session,
// revoke a device, take control down.
package fakecontrol

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/httpjson"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Server is the fake control. The zero value is not usable; use New.
type Server struct {
	mu       sync.Mutex
	version  uint64
	changed  chan struct{} // closed and replaced on every change
	closed   chan struct{}
	down     bool
	sessions map[string]*session  // by token
	devices  map[string]*device   // by id
	clusters map[string]*cluster  // by cid
	calls    map[string]int       // "METHOD /route" → count
	revoked  map[string]time.Time // public key → when it was revoked
	nextAddr netip.Addr

	// NoStreams answers a device map stream request (?stream=1) as a
	// long-poll, as a control older than push streams does.
	NoStreams bool

	// OnJoin and OnLeave run (in their own goroutine) after a device joins
	// or leaves a cluster, as control would wake the cluster's gateway;
	// OnSessionEnd after a session ends or lapses, with the device's key.
	OnJoin       func(cid string, dev api.Device)
	OnLeave      func(cid string, dev api.Device)
	OnSessionEnd func(dev api.Device)
	// BeforeJoinAnswer runs before a join is answered, as control's wait
	// for the serving gateway (control/server/joinack.go) does.
	BeforeJoinAnswer func(cid string)
}

type session struct {
	id, user  string
	expiresAt time.Time
	ended     bool
	revokedAt time.Time // its device was revoked
	deviceID  string
	timer     *time.Timer
}

type device struct {
	api.Device
	joined map[string]bool
}

type cluster struct {
	api.Cluster
	vpn api.VPNConfig
}

// New returns an empty fake control.
func New() *Server {
	return &Server{
		changed: make(chan struct{}), closed: make(chan struct{}),
		sessions: map[string]*session{}, devices: map[string]*device{}, clusters: map[string]*cluster{},
		calls: map[string]int{}, revoked: map[string]time.Time{}, nextAddr: netip.MustParseAddr("100.96.0.2"),
	}
}

// bump records a change: the version moves and every long-poll wakes. mu held.
func (s *Server) bump() {
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
}

// Close wakes and ends every long-poll, so the HTTP server can shut down.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	for _, ss := range s.sessions {
		if ss.timer != nil {
			ss.timer.Stop()
		}
	}
}

// AddSession makes token a sign-in of user lasting ttl.
func (s *Server) AddSession(token, user string, ttl time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp := time.Now().Add(ttl).Truncate(time.Second)
	ss := &session{id: "s" + strconv.Itoa(len(s.sessions)+1), user: user, expiresAt: exp}
	s.sessions[token] = ss
	// Control acts at the instant a session lapses (a timer, not a sweep).
	ss.timer = time.AfterFunc(time.Until(exp), func() {
		s.mu.Lock()
		dev := s.devices[ss.deviceID]
		s.bump()
		s.mu.Unlock()
		if dev != nil && s.OnSessionEnd != nil {
			s.OnSessionEnd(dev.Device)
		}
	})
	return exp
}

// ExpireSession ends token's session now, as if it lapsed.
func (s *Server) ExpireSession(token string) {
	s.mu.Lock()
	ss := s.sessions[token]
	var dev *device
	if ss != nil {
		ss.expiresAt = time.Now().Add(-time.Second)
		dev = s.devices[ss.deviceID]
		s.bump()
	}
	s.mu.Unlock()
	if dev != nil && s.OnSessionEnd != nil {
		s.OnSessionEnd(dev.Device)
	}
}

// RevokeDevice revokes the device with public key pub as an operator
// would: its session ends as revoked and the key is refused from then on.
func (s *Server) RevokeDevice(pub string) time.Time {
	s.mu.Lock()
	at := time.Now().UTC().Truncate(time.Second)
	s.revoked[pub] = at
	var dev *device
	for _, d := range s.devices {
		if d.PublicKey == pub {
			dev = d
		}
	}
	for _, ss := range s.sessions {
		if dev != nil && ss.deviceID == dev.ID {
			ss.revokedAt = at
		}
	}
	s.bump()
	s.mu.Unlock()
	if dev != nil && s.OnSessionEnd != nil {
		s.OnSessionEnd(dev.Device)
	}
	return at
}

// AddCluster adds a cluster of the account with its VPN config.
func (s *Server) AddCluster(c api.Cluster, vpn api.VPNConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[c.CID] = &cluster{Cluster: c, vpn: vpn}
	s.bump()
}

// SetVPN changes a cluster's VPN config (a move: new node, key, endpoint),
// pushing it to every joined device at once.
func (s *Server) SetVPN(cid string, vpn api.VPNConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[cid].vpn = vpn
	s.bump()
}

// SetDown makes control drop every request (true) or answer again (false).
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	s.bump() // wake long-polls so they notice
}

// Calls returns how many times "METHOD /route" was called (routes with
// their parameters as {id} and {cid}).
func (s *Server) Calls(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[route]
}

// Device returns the device registered with public key pub.
func (s *Server) Device(pub string) (api.Device, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devices {
		if d.PublicKey == pub {
			return d.Device, true
		}
	}
	return api.Device{}, false
}

// Devices returns every registered device.
func (s *Server) Devices() []api.Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []api.Device
	for _, d := range s.devices {
		out = append(out, d.Device)
	}
	return out
}

// Joined returns the cids device id has joined.
func (s *Server) Joined(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	if d := s.devices[id]; d != nil {
		for cid := range d.joined {
			out = append(out, cid)
		}
	}
	slices.Sort(out)
	return out
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		panic(http.ErrAbortHandler) // the connection drops, as when control is unreachable
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	route := r.Method + " /" + strings.Join(routeOf(parts), "/")
	s.mu.Lock()
	s.calls[route]++
	s.mu.Unlock()
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	ss, aerr := s.auth(tok)
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	switch route {
	case "GET /v1/me":
		s.mu.Lock()
		var accts []string
		for _, c := range s.clusters {
			if !slices.Contains(accts, c.AID) {
				accts = append(accts, c.AID)
			}
		}
		me := api.Me{User: ss.user, Accounts: accts, ExpiresAt: ss.expiresAt, SessionID: ss.id}
		s.mu.Unlock()
		writeJSON(w, me)
	case "DELETE /v1/sessions/current":
		s.mu.Lock()
		ss.ended = true
		dev := s.devices[ss.deviceID]
		s.bump()
		s.mu.Unlock()
		if dev != nil && s.OnSessionEnd != nil {
			go s.OnSessionEnd(dev.Device)
		}
		w.WriteHeader(http.StatusNoContent)
	case "GET /v1/clusters":
		s.mu.Lock()
		var out []api.Cluster
		for _, c := range s.clusters {
			out = append(out, c.Cluster)
		}
		s.mu.Unlock()
		slices.SortFunc(out, func(a, b api.Cluster) int { return strings.Compare(a.CID, b.CID) })
		writeJSON(w, out)
	case "POST /v1/devices":
		s.register(w, r, ss)
	case "PUT /v1/devices/{id}/clusters/{cid}":
		s.join(w, ss, parts[2], parts[4])
	case "DELETE /v1/devices/{id}/clusters/{cid}":
		s.leave(w, ss, parts[2], parts[4])
	case "GET /v1/devices/{id}/map":
		s.deviceMap(w, r, tok, parts[2])
	default:
		writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no route " + route})
	}
}

func routeOf(parts []string) []string {
	out := slices.Clone(parts)
	if len(out) >= 3 && out[1] == "devices" {
		out[2] = "{id}"
	}
	if len(out) >= 5 && out[3] == "clusters" {
		out[4] = "{cid}"
	}
	return out
}

func (s *Server) auth(tok string) (*session, *api.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[tok]
	switch {
	case ss == nil || ss.ended:
		return nil, &api.Error{Status: 401, Code: api.CodeUnauthorized, Message: "unknown or ended session"}
	case !ss.revokedAt.IsZero():
		return nil, &api.Error{Status: 401, Code: api.CodeDeviceRevoked, At: ss.revokedAt,
			Message: "this device was removed from RunOS at " + ss.revokedAt.Format(time.RFC3339), Hint: "`runos vpn up` signs in again with a new key"}
	case !time.Now().Before(ss.expiresAt):
		return nil, &api.Error{Status: 401, Code: api.CodeSessionExpired, Message: "the session expired", Hint: "run `runos vpn up` to sign in again"}
	}
	return ss, nil
}

func (s *Server) register(w http.ResponseWriter, r *http.Request, ss *session) {
	var req api.RegisterDeviceRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, &api.Error{Status: 400, Code: api.CodeInvalid, Message: "bad body: " + err.Error()})
		return
	}
	if _, err := wgtypes.ParseKey(req.PublicKey); err != nil {
		writeErr(w, &api.Error{Status: 400, Code: api.CodeInvalid, Message: "bad public key"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.revoked[req.PublicKey]; ok {
		writeErr(w, &api.Error{Status: 403, Code: api.CodeDeviceRevoked, At: at, Message: "this device's key was revoked"})
		return
	}
	for _, d := range s.devices {
		if d.PublicKey == req.PublicKey {
			ss.deviceID = d.ID
			writeJSON(w, d.Device)
			return
		}
	}
	d := &device{Device: api.Device{ID: "d" + strconv.Itoa(len(s.devices)+1), User: ss.user, Name: req.Name, OS: req.OS,
		PublicKey: req.PublicKey, Address: s.nextAddr.String()}, joined: map[string]bool{}}
	s.nextAddr = s.nextAddr.Next()
	s.devices[d.ID] = d
	ss.deviceID = d.ID
	s.bump()
	writeJSON(w, d.Device)
}

func (s *Server) ownDevice(ss *session, id string) (*device, *api.Error) {
	d := s.devices[id]
	if d == nil || d.User != ss.user {
		return nil, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "device " + id + " not found"}
	}
	return d, nil
}

func (s *Server) join(w http.ResponseWriter, ss *session, id, cid string) {
	s.mu.Lock()
	d, aerr := s.ownDevice(ss, id)
	if aerr != nil {
		s.mu.Unlock()
		writeErr(w, aerr)
		return
	}
	c := s.clusters[cid]
	if c == nil {
		s.mu.Unlock()
		writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: fmt.Sprintf("cluster %s not found", cid),
			Hint: "runos clusters list shows the clusters you can reach"})
		return
	}
	d.joined[cid] = true
	s.bump()
	cc := s.config(c)
	dev := d.Device
	s.mu.Unlock()
	if s.OnJoin != nil {
		go s.OnJoin(cid, dev)
	}
	if s.BeforeJoinAnswer != nil {
		s.BeforeJoinAnswer(cid)
	}
	writeJSON(w, cc)
}

func (s *Server) leave(w http.ResponseWriter, ss *session, id, cid string) {
	s.mu.Lock()
	d, aerr := s.ownDevice(ss, id)
	if aerr != nil {
		s.mu.Unlock()
		writeErr(w, aerr)
		return
	}
	was := d.joined[cid]
	delete(d.joined, cid)
	s.bump()
	dev := d.Device
	s.mu.Unlock()
	if was && s.OnLeave != nil {
		go s.OnLeave(cid, dev)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) config(c *cluster) api.ClusterConfig {
	return api.ClusterConfig{CID: c.CID, AID: c.AID, Name: c.Name, Domain: c.Domain, VPN: c.vpn}
}

func (s *Server) deviceMap(w http.ResponseWriter, r *http.Request, tok, id string) {
	since, _ := strconv.ParseUint(r.URL.Query().Get(api.ParamSince), 10, 64)
	s.mu.Lock()
	stream := !s.NoStreams && r.URL.Query().Get(api.ParamStream) == "1"
	s.mu.Unlock()
	if stream {
		s.streamMap(w, r, tok, id, since)
		return
	}
	wait := 60 * time.Second
	if v, err := strconv.Atoi(r.URL.Query().Get(api.ParamWait)); err == nil && v >= 0 && v <= 300 {
		wait = time.Duration(v) * time.Second
	}
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for {
		ss, aerr := s.auth(tok)
		if aerr != nil {
			writeErr(w, aerr)
			return
		}
		s.mu.Lock()
		d, aerr := s.ownDevice(ss, id)
		if aerr != nil {
			s.mu.Unlock()
			writeErr(w, aerr)
			return
		}
		if s.down {
			s.mu.Unlock()
			panic(http.ErrAbortHandler)
		}
		changed := s.changed
		if s.version > since {
			m := s.mapLocked(ss, d)
			s.mu.Unlock()
			writeJSON(w, m)
			return
		}
		s.mu.Unlock()
		select {
		case <-changed:
		case <-timeout.C:
			since = 0 // answer the current document unchanged
		case <-s.closed:
			panic(http.ErrAbortHandler)
		case <-r.Context().Done():
			return
		}
	}
}

// mapLocked is device d's map. mu held.
func (s *Server) mapLocked(ss *session, d *device) api.DeviceMap {
	m := api.DeviceMap{Version: s.version, Device: d.Device,
		Session: api.SessionInfo{ID: ss.id, User: ss.user, ExpiresAt: ss.expiresAt}}
	for cid := range d.joined {
		if c := s.clusters[cid]; c != nil {
			m.Clusters = append(m.Clusters, s.config(c))
		}
	}
	slices.SortFunc(m.Clusters, func(a, b api.ClusterConfig) int { return strings.Compare(a.CID, b.CID) })
	return m
}

// streamMap is the device map as a push stream (docs/internals.md "Push"):
// an event per new version, the session checked before each, a refusal
// as the last event. The fake's stream holds its handler (control's own
// does not).
func (s *Server) streamMap(w http.ResponseWriter, r *http.Request, tok, id string, since uint64) {
	first := true
	for {
		ss, aerr := s.auth(tok)
		s.mu.Lock()
		var d *device
		if aerr == nil {
			d, aerr = s.ownDevice(ss, id)
		}
		if s.down {
			s.mu.Unlock()
			panic(http.ErrAbortHandler)
		}
		if aerr != nil {
			s.mu.Unlock()
			if first {
				writeErr(w, aerr)
				return
			}
			data, _ := json.Marshal(api.StreamError{Status: aerr.Status, Error: aerr})
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", api.EventError, data)
			return
		}
		changed := s.changed
		var m *api.DeviceMap
		if s.version > since {
			mm := s.mapLocked(ss, d)
			m = &mm
		}
		s.mu.Unlock()
		if first {
			w.Header().Set("Content-Type", api.StreamContentType)
			w.WriteHeader(http.StatusOK)
			first = false
		}
		if m != nil {
			data, _ := json.Marshal(m)
			w.Write(api.AppendEvent(nil, api.EventDeviceMap, m.Version, data))
			since = m.Version
		}
		http.NewResponseController(w).Flush()
		select {
		case <-changed:
		case <-s.closed:
			panic(http.ErrAbortHandler)
		case <-r.Context().Done():
			return
		}
	}
}

// writeJSON and writeErr answer as control does (internal/httpjson).
func writeJSON(w http.ResponseWriter, v any) {
	_ = httpjson.Write(w, http.StatusOK, v) // the api types it serves encode
}

func writeErr(w http.ResponseWriter, e *api.Error) {
	_ = httpjson.Write(w, e.Status, api.ErrorBody{Error: e})
}
