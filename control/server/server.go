// Package server is runos-control's HTTPS/JSON API under /v1 (the routes of
// api/client.go) and the logic behind it: authentication, device
// registration and cluster joins, the gateway maps and reports, VPN services
// and their moves, and session expiry acted on at the instant it happens.
// Every change is one store transaction whose topics are handed to the hub,
// so the long-polls concerned answer within milliseconds of the commit.
package server

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/relayticket"
	"github.com/runos/vpn/control/reqid"
	"github.com/runos/vpn/control/resume"
	"github.com/runos/vpn/control/rules"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/stream"
)

// Config configures a Server. Zero durations take the defaults shown.
type Config struct {
	Store  store.Store
	Hub    *hub.Hub
	Clock  clock.Clock  // nil: the real clock
	Logger *slog.Logger // nil: discard

	SessionTTL       time.Duration // 24h
	SessionRetention time.Duration // how long ended and expired sessions are remembered as such; 30 days
	DevicePool       netip.Prefix  // 100.96.0.0/16
	ServicePool      netip.Prefix  // 100.100.0.0/16
	MoveReadyTimeout time.Duration // 15s: the target must report listening within it
	MoveDeadline     time.Duration // 30s: after the switch, done even if not every device handshaked
	HeartbeatTimeout time.Duration // 30s: a node is no_heartbeat this long after its last report
	JoinAckTimeout   time.Duration // 1s: the longest a join waits for its gateway to hold the device (joinack.go)

	MaxDevicesPerUser int           // 20: a user's devices (revoked ones too, until deleted)
	DeviceIdleTTL     time.Duration // 30 days: a device with no session and no handshake this long is deleted
	// Metrics counts long-polls and finished moves (control/metrics); nil: none.
	Metrics Metrics
	// IdentityAccount is the account users signed in by the identity
	// provider belong to (SignInIdentity); "": none is configured.
	IdentityAccount string
	// Identity, when set, is the identity provider asked about each user
	// who signed in through it every IdentityCheckEvery (15m): a user it
	// no longer accepts loses their sessions (idcheck.go).
	Identity           IdentityChecker
	IdentityCheckEvery time.Duration

	// Push streams (control/stream): the heartbeat period (15s) and the
	// bound on one write (30s) past which a stream is dropped. NoStreams
	// answers stream requests as long-polls, as a control older than
	// streams does (for a proxy that buffers answers).
	StreamHeartbeat    time.Duration
	StreamWriteTimeout time.Duration
	NoStreams          bool
	// RelaySecret signs relay tickets (relay.go); replicas must share it
	// (control takes it from the store). nil: 32 random bytes.
	RelaySecret []byte
	// Resolve looks a relay URL's host name up (an operator's override
	// must resolve to the node's ingress address); nil: the system's
	// resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// MaxHeldPerToken bounds the streams and long-polls one token holds
	// at once (holds.go); 0: 100.
	MaxHeldPerToken int
	// Shared says other replicas commit to the same store (PostgreSQL):
	// the replica holding the timers' lease then learns of their sessions,
	// moves and services from the hub (control/notify feeds it).
	Shared bool
}

// Metrics receives what control's metrics count from the API's logic.
type Metrics interface {
	// PollHeld counts a long-poll of kind as held until done runs.
	PollHeld(kind string) (done func())
	// StreamHeld counts a push stream of kind as open until done runs.
	StreamHeld(kind string) (done func())
	// StreamDropped counts a stream dropped for back-pressure ("slow": it
	// did not read) or a dead connection ("gone").
	StreamDropped(kind, reason string)
	// MoveFinished counts a move that ended: outcome done, deadline (done
	// with devices left behind) or failed; switchMs is its switch time
	// when it saw a handshake.
	MoveFinished(outcome string, switchMs int64, sawHandshake bool)
	// JoinAcked counts a join's wait for a gateway (joinack.go; two during
	// a move): acked, or timeout (answered anyway after Config.JoinAckTimeout).
	JoinAcked(outcome string)
}

type noMetrics struct{}

func (noMetrics) PollHeld(string) func()           { return func() {} }
func (noMetrics) StreamHeld(string) func()         { return func() {} }
func (noMetrics) StreamDropped(string, string)     {}
func (noMetrics) MoveFinished(string, int64, bool) {}
func (noMetrics) JoinAcked(string)                 {}

// Server serves the /v1 API. It is safe for concurrent use.
type Server struct {
	cfg      Config
	st       store.Store
	hub      *hub.Hub
	clock    clock.Clock
	log      *slog.Logger
	devices  pool.Devices
	services pool.Services
	mux      *http.ServeMux
	streams  *stream.Streams

	auth       authCache
	clusters   clusterCache
	devCache   deviceCache
	used       *throttle  // operator tokens' last use, written at most once a minute
	seen       *throttle  // devices' last contact, written at most every seenEvery
	hs         handshakes // the handshakes last written, per cluster and key
	reported   mapReports // the map versions gateways' reports to this replica acted on (joinack.go)
	held       holds      // streams and long-polls held, per token and device
	tickets    *relayticket.Signer
	resumes    *resume.Signer // device map streams' resume tokens (resume.go)
	resumePace pacer
	pool       poolWatch   // whether the device pool's near-full warning was logged
	grantKey   cipher.AEAD // seals the identity provider's refresh tokens (idcheck.go); nil without Config.Identity

	// upSince is when this server came up: heartbeats could not arrive
	// before it (rules.Heartbeats).
	upSince time.Time

	mu      sync.Mutex
	timers  map[string]*timer
	expiry  time.Time // when the session-expiry timer is armed for (zero: not armed)
	leading bool      // this replica holds the timers' lease
	idleAt  time.Time // when the idle clean-up timer is armed for (zero: not armed)
	closed  bool
	bgWG    sync.WaitGroup
	closeCh chan struct{}
	rearm   rearmQueue
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// New checks cfg and returns a Server. Call Start before serving and Close
// when done.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Hub == nil {
		return nil, errors.New("server: Config needs a Store and a Hub")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	setDefault(&cfg.SessionTTL, 24*time.Hour)
	setDefault(&cfg.SessionRetention, 30*24*time.Hour)
	setDefault(&cfg.MoveReadyTimeout, 15*time.Second)
	setDefault(&cfg.MoveDeadline, 30*time.Second)
	setDefault(&cfg.HeartbeatTimeout, 30*time.Second)
	setDefault(&cfg.JoinAckTimeout, time.Second)
	setDefault(&cfg.DeviceIdleTTL, 30*24*time.Hour)
	setDefault(&cfg.IdentityCheckEvery, 15*time.Minute)
	if cfg.RelaySecret == nil {
		cfg.RelaySecret = make([]byte, 32)
		_, _ = rand.Read(cfg.RelaySecret)
	}
	tickets, err := relayticket.New(cfg.RelaySecret)
	if err != nil {
		return nil, err
	}
	resumes, err := resume.New(cfg.RelaySecret) // its own key, derived under another label
	if err != nil {
		return nil, err
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.MaxHeldPerToken <= 0 {
		cfg.MaxHeldPerToken = defaultMaxHeldPerToken
	}
	if cfg.MaxDevicesPerUser <= 0 {
		cfg.MaxDevicesPerUser = 20
	}
	if !cfg.DevicePool.IsValid() {
		cfg.DevicePool = netip.MustParsePrefix(api.DefaultDevicePool)
	}
	if !cfg.ServicePool.IsValid() {
		cfg.ServicePool = netip.MustParsePrefix(api.DefaultServicePool)
	}
	devices, err := pool.NewDevices(cfg.DevicePool)
	if err != nil {
		return nil, err
	}
	services, err := pool.NewServices(cfg.ServicePool)
	if err != nil {
		return nil, err
	}
	if pool.Overlaps(devices, services) {
		return nil, fmt.Errorf("device pool %s and service pool %s overlap: give them separate ranges", devices.Prefix(), services.Prefix())
	}
	s := &Server{
		cfg: cfg, st: cfg.Store, hub: cfg.Hub, clock: cfg.Clock, log: cfg.Logger,
		devices: devices, services: services,
		timers:     map[string]*timer{},
		closeCh:    make(chan struct{}),
		upSince:    cfg.Clock.Now(),
		used:       newThrottle(usedEvery, 10_000),
		seen:       newThrottle(seenEvery, 200_000),
		hs:         handshakes{m: map[string]time.Time{}},
		reported:   mapReports{v: map[string]uint64{}, changed: make(chan struct{})},
		tickets:    tickets,
		resumes:    resumes,
		resumePace: pacer{every: resumeEvery, burst: resumeBurst, maxWait: resumeMaxWait},
	}
	s.rearm.wake = make(chan struct{}, 1)
	s.streams = stream.New(stream.Config{Hub: cfg.Hub, Clock: cfg.Clock, Logger: cfg.Logger,
		Heartbeat: cfg.StreamHeartbeat, WriteTimeout: cfg.StreamWriteTimeout})
	s.auth.init()
	s.clusters.init()
	s.devCache.init()
	s.routes()
	return s, nil
}

// Parked is how many long-polls are waiting for a change.
func (s *Server) Parked() int { return s.hub.Watchers() }

// Streams is how many push streams are open.
func (s *Server) Streams() int { return s.streams.Len() }

// Handler is the /v1 API. Each request gets an id (control/reqid) unless
// an outer handler gave it one.
func (s *Server) Handler() http.Handler { return reqid.Handler(s.mux) }

// Start takes part in acting on timers (timers.go): it acts at once when
// this replica gets the timers' lease (always, on SQLite), and otherwise
// waits in the background to take over from the replica that holds it.
func (s *Server) Start(ctx context.Context) error {
	if err := s.identityKey(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	l, err := s.st.TryLease(ctx, timersLease)
	switch {
	case err == nil:
		if err := s.lead(ctx, l); err != nil {
			return fmt.Errorf("start: %w", err)
		}
	case !errors.Is(err, store.ErrHeld):
		s.log.Warn("timers: cannot take the lease yet; retrying", "err", err)
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		s.leaseLoop(l)
	}()
	if s.cfg.Shared {
		s.cfg.Hub.OnPublish(s.heard)
		s.bgWG.Add(1)
		go func() {
			defer s.bgWG.Done()
			s.rearmLoop()
		}()
	}
	return nil
}

// Close stops the timers and gives the timers' lease up.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closeCh)
		s.stopTimersLocked()
	}
	s.mu.Unlock()
	s.streams.Close() // each client resumes elsewhere, or here once control is back
	s.bgWG.Wait()
}

// update runs fn as one change and publishes what it touched. Moves the
// change finished are counted once it is committed.
func (s *Server) update(ctx context.Context, fn func(store.Writer) error) error {
	var moves map[string]model.Move
	ch, err := s.st.Update(ctx, func(tx store.Writer) error {
		moves = nil // a retried transaction starts again
		return fn(&moveWriter{Writer: tx, moves: &moves})
	})
	if err != nil {
		return err
	}
	if ch.Version > 0 {
		s.hub.Publish(ch.Version, ch.Topics)
	}
	for _, m := range moves {
		switch {
		case m.State == api.MoveFailed:
			s.cfg.Metrics.MoveFinished("failed", 0, false)
		case m.State == api.MoveDone && m.Switched >= m.Total:
			s.cfg.Metrics.MoveFinished("done", m.SwitchMs, !m.LastHandshake.IsZero())
		case m.State == api.MoveDone:
			s.cfg.Metrics.MoveFinished("deadline", m.SwitchMs, !m.LastHandshake.IsZero())
		}
	}
	return nil
}

// moveWriter remembers the last state of each move a change writes; a
// move reaches done or failed once (every path checks the state first),
// so a finished one seen here has just finished.
type moveWriter struct {
	store.Writer
	moves *map[string]model.Move
}

func (w *moveWriter) note(m model.Move) {
	if *w.moves == nil {
		*w.moves = map[string]model.Move{}
	}
	(*w.moves)[m.ID] = m
}

func (w *moveWriter) PutMove(m model.Move) error {
	err := w.Writer.PutMove(m)
	if err == nil {
		w.note(m)
	}
	return err
}

func (w *moveWriter) UpdateMove(m model.Move) error {
	err := w.Writer.UpdateMove(m)
	if err == nil {
		w.note(m)
	}
	return err
}

// bg is the context of work started by timers.
func (s *Server) bg() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func (s *Server) now() time.Time { return s.clock.Now() }

// heartbeats is how node status is decided (rules.Heartbeats).
func (s *Server) heartbeats() rules.Heartbeats {
	return rules.Heartbeats{Timeout: s.cfg.HeartbeatTimeout, Since: s.upSince}
}
