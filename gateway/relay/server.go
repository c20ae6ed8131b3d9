package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/relaywire"
)

// Checker asks control whether the device with key, presenting ticket (a
// relay ticket control issued it for this node), may use this node's
// relay; it returns the device's id. A refusal is an *api.Error (passed on
// to the device).
type Checker func(ctx context.Context, ticket string, key wgtypes.Key) (deviceID string, err error)

// Server is the HTTP handler of the relay: it authenticates a device with
// control, upgrades the request to a WebSocket and attaches the stream to
// the Bind until either end closes it. It serves relaywire.Path and
// nothing else.
type Server struct {
	Bind  *Bind
	Check Checker
	// Serving reports whether this node runs a VPN server now: the relay
	// refuses streams while it does not (they would reach nothing).
	Serving func() bool
	Log     *slog.Logger
	// RecordDir, when set, receives every stream's bytes and every
	// request's headers (the hidden --relay-record flag of runos-gateway,
	// for the end-to-end tests that the relay carries ciphertext only and
	// is never shown a session token).
	RecordDir string
	// BehindProxy: requests come through the node's ingress (on
	// loopback), which names the device in X-Forwarded-For.
	BehindProxy bool
	// MaxPerAddr bounds the streams one device address (remote) holds at
	// once; past it a request is answered 429 before control is asked.
	// 0: DefaultMaxPerAddr.
	MaxPerAddr int

	perAddr addrCount
	reqs    atomic.Uint64 // requests recorded
}

// DefaultMaxPerAddr is the streams one address may hold: a device holds
// one per cluster whose UDP is blocked; a NAT may hide a few devices.
const DefaultMaxPerAddr = 64

// checkTimeout bounds the question to control.
const checkTimeout = 10 * time.Second

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.recordRequest(r)
	if r.URL.Path != relaywire.Path {
		refuse(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound,
			Message: "no such path on the RunOS relay: it serves " + relaywire.Path + " only"})
		return
	}
	if r.Method != http.MethodGet {
		refuse(w, &api.Error{Status: http.StatusMethodNotAllowed, Code: api.CodeInvalid, Message: "the relay takes GET (a WebSocket upgrade)"})
		return
	}
	if s.Serving != nil && !s.Serving() {
		refuse(w, &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
			Message: "this node does not serve the cluster's VPN now", Hint: "the device map names the node that does"})
		return
	}
	if r.Header.Get("Authorization") != "" {
		// A session token is a full API credential: it is never passed
		// on, nor logged.
		refuse(w, &api.Error{Status: http.StatusBadRequest, Code: api.CodeInvalid,
			Message: "the relay takes a relay ticket (" + relaywire.HeaderTicket + "), never a session token",
			Hint:    "update runos: this version sends its session to the relay"})
		return
	}
	ticket := r.Header.Get(relaywire.HeaderTicket)
	if ticket == "" {
		refuse(w, &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized,
			Message: "no relay ticket: the relay takes the ticket control issues the device (" + relaywire.HeaderTicket + ")"})
		return
	}
	key, err := wgtypes.ParseKey(r.Header.Get(relaywire.HeaderDeviceKey))
	if err != nil {
		refuse(w, &api.Error{Status: http.StatusBadRequest, Code: api.CodeInvalid,
			Message: relaywire.HeaderDeviceKey + ": want the device's WireGuard public key (base64)"})
		return
	}
	remote := s.remote(r)
	max := s.MaxPerAddr
	if max <= 0 {
		max = DefaultMaxPerAddr
	}
	if !s.perAddr.take(remote.Addr(), max) {
		s.Log.Info("relay: refused a stream: its address holds its allowance", "remote", remote.Addr().String(), "max", max)
		refuse(w, &api.Error{Status: http.StatusTooManyRequests, Code: api.CodeTooMany,
			Message: fmt.Sprintf("this address holds %d relay streams already", max), Hint: "close some, then retry"})
		return
	}
	defer s.perAddr.give(remote.Addr())
	cctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
	device, err := s.Check(cctx, ticket, key)
	cancel()
	if err != nil {
		var ae *api.Error
		if !errors.As(err, &ae) {
			s.Log.Warn("relay: cannot ask control about a device", "key", key.String(), "remote", remote.String(), "err", err)
			ae = &api.Error{Status: http.StatusBadGateway, Code: api.CodeUnavailable,
				Message: "the relay cannot reach control to check the session now", Hint: "the device retries"}
		} else {
			s.Log.Info("relay: refused a device", "key", key.String(), "remote", remote.String(), "err", ae.Error())
		}
		refuse(w, ae)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{relaywire.Subprotocol}})
	if err != nil {
		s.Log.Info("relay: upgrade failed", "device", device, "remote", remote.String(), "err", err)
		return
	}
	if c.Subprotocol() != relaywire.Subprotocol {
		c.Close(websocket.StatusPolicyViolation, "want the "+relaywire.Subprotocol+" subprotocol")
		return
	}
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	ep := &Endpoint{id: s.Bind.nextID.Add(1), key: key, remote: remote}
	t := s.tap(ep)
	defer t.Close()
	st := newStream(s.Bind, ep, device, websocket.NetConn(ctx, c, websocket.MessageBinary), t)
	s.Bind.attach(st)
	s.Log.Info("relay: stream opened", "device", device, "key", key.String(), "remote", remote.String(), "stream", ep.id)
	start := time.Now()
	err = st.readLoop()
	st.close(err)
	s.Bind.detach(st)
	s.Log.Info("relay: stream closed", "device", device, "key", key.String(), "stream", ep.id, "why", closeReason(st.err),
		"for", time.Since(start).Round(time.Millisecond).String(), "rxBytes", st.rx.Load(), "txBytes", st.tx.Load())
}

func closeReason(err error) string {
	switch {
	case err == nil:
		return "closed"
	case websocket.CloseStatus(err) == websocket.StatusNormalClosure, errors.Is(err, context.Canceled), strings.Contains(err.Error(), "EOF"):
		return "the device closed it"
	}
	return err.Error()
}

// recordRequest writes r's request line and headers to RecordDir, when
// set, as the relay saw them.
func (s *Server) recordRequest(r *http.Request) {
	if s.RecordDir == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\n", r.Method, r.URL.RequestURI(), r.Proto)
	_ = r.Header.Write(&b)
	name := filepath.Join(s.RecordDir, fmt.Sprintf("request-%d.txt", s.reqs.Add(1)))
	if err := os.WriteFile(name, []byte(b.String()), 0o600); err != nil {
		s.Log.Warn("relay: cannot record a request", "err", err)
	}
}

// tap opens the recording of a stream when RecordDir is set.
func (s *Server) tap(ep *Endpoint) *tap {
	if s.RecordDir == "" {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(s.RecordDir, fmt.Sprintf("stream-%d.bin", ep.id)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		s.Log.Warn("relay: cannot record a stream", "err", err)
		return nil
	}
	return &tap{w: f}
}

// addrCount counts the streams per device address.
type addrCount struct {
	mu sync.Mutex
	n  map[netip.Addr]int
}

func (c *addrCount) take(a netip.Addr, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[netip.Addr]int{}
	}
	if c.n[a] >= max {
		return false
	}
	c.n[a]++
	return true
}

func (c *addrCount) give(a netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[a] <= 1 {
		delete(c.n, a)
	} else {
		c.n[a]--
	}
}

// refuse answers with control's error shape, so the device's message is
// the same whichever of the two refused it.
func refuse(w http.ResponseWriter, e *api.Error) {
	status := e.Status
	if status == 0 {
		status = http.StatusForbidden
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: e})
}

// remote is the device's address as far as the relay can tell: the TCP
// peer, or, behind the node's ingress on loopback, the last address the
// ingress put in X-Forwarded-For (its port unknown: 0).
func (s *Server) remote(r *http.Request) netip.AddrPort {
	ap, _ := netip.ParseAddrPort(r.RemoteAddr)
	if !s.BehindProxy || !ap.Addr().IsLoopback() {
		return ap
	}
	xff := r.Header.Values("X-Forwarded-For")
	if len(xff) == 0 {
		return ap
	}
	last := xff[len(xff)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	if a, err := netip.ParseAddr(strings.TrimSpace(last)); err == nil {
		return netip.AddrPortFrom(a.Unmap(), 0)
	}
	return ap
}
