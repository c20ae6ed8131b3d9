// Package control runs runos-control: it opens the store (SQLite, or
// PostgreSQL shared by several replicas), imports the world file, builds the
// change hub (fed across replicas by control/notify), the /v1 API, the OAuth
// authorization server, the console (/console) and the health endpoints on
// one mux, and serves HTTPS (or plain HTTP behind an explicit
// --insecure-http) until its context ends, then shuts down gracefully.
package control

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/metrics"
	"github.com/runos/vpn/control/oidc"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/reqid"
	"github.com/runos/vpn/control/server"
	"github.com/runos/vpn/control/store"
)

// Config is runos-control's configuration (its flags).
type Config struct {
	Listen       string // ":443"
	TLSCert      string
	TLSKey       string
	InsecureHTTP bool   // serve plain HTTP; only with this set
	DB           string // the SQLite file: Store sqlite:DB
	Store        string // sqlite:PATH or postgres://…; "" means sqlite:DB
	Seed         string // world file; "" imports nothing
	Issuer       string // public base URL; "" derives it from Listen

	// ReplicaName names this replica (several share a PostgreSQL store):
	// in its logs, its database connections and a RunOS-Replica header on
	// every answer. "" sends no header.
	ReplicaName string
	// TrustedProxies are the load balancers whose X-Forwarded-For is the
	// client's address (proxy.go).
	TrustedProxies []netip.Prefix
	// StoreWait is how long start waits for a PostgreSQL store that does
	// not answer yet (replicas started with their database); 0: 30s.
	StoreWait time.Duration

	SessionTTL       time.Duration
	DevicePool       netip.Prefix
	ServicePool      netip.Prefix
	MoveReadyTimeout time.Duration
	MoveDeadline     time.Duration
	HeartbeatTimeout time.Duration
	JoinAckTimeout   time.Duration // 0: 1s (server.Config)
	BcryptCost       int           // for plain passwords in the world file; 0 means 12

	MaxDevicesPerUser int           // 0: 20
	DeviceIdleTTL     time.Duration // 0: 30 days

	// Push streams (docs/internals.md "Push"): the heartbeat period (0:
	// 15s), and NoStreams answers stream requests as long-polls.
	StreamHeartbeat time.Duration
	NoStreams       bool

	Logger *slog.Logger
	Clock  clock.Clock // nil: the real clock

	// Slow clients (docs/internals.md "Slow clients"): a request's body
	// must arrive within BodyTimeout of its headers (0: 10s); one address
	// holds at most MaxConnsPerAddr connections at once (0: 512; -1: no
	// cap), TrustedProxies exempt (behind a balancer every connection
	// comes from it: the balancer limits its clients); one token holds at
	// most MaxHeldPerToken streams and long-polls (0: 100).
	BodyTimeout     time.Duration
	MaxConnsPerAddr int
	MaxHeldPerToken int

	// Ready, when set, is called with the URL once control is serving.
	Ready func(url string)
	// Serving, when set, is called with the API once control is serving
	// (tests read its state, e.g. how many long-polls are parked).
	Serving func(*server.Server)
	// Listener, when set, is served instead of listening on Listen.
	Listener net.Listener
	// OnHub, when set, is given the change hub once built (tests watch
	// its watchers to know a long-poll is parked).
	OnHub func(*hub.Hub)
	// MetricsAddr serves Prometheus metrics (control/metrics) on its own
	// address, unauthenticated, at /metrics; "" serves none.
	MetricsAddr string
	// MetricsListener, when set, is served instead of listening on MetricsAddr.
	MetricsListener net.Listener

	// OIDC, when its issuer is set, is the identity provider the login
	// page offers; its users are created in OIDCAccount at their first
	// sign-in. OIDCClient is how control reaches the provider (nil:
	// http.DefaultClient; tests give one trusting their CA).
	OIDC        oidc.Config
	OIDCAccount string
	OIDCClient  *http.Client
	// OIDCCheckEvery is how often each user signed in through the
	// provider is checked there (0: 15m); a user it no longer accepts
	// loses their sessions.
	OIDCCheckEvery time.Duration
}

// Check reports the first thing wrong with cfg, saying what to do.
func (cfg *Config) Check() error {
	switch {
	case cfg.DB == "" && cfg.Store == "":
		return errors.New("--store: say where the data lives: sqlite:/var/lib/runos-control/control.db (or --db PATH), or postgres://user:password@host:port/database")
	case cfg.DB != "" && cfg.Store != "":
		return errors.New("--db and --store: give one (--db PATH is --store sqlite:PATH)")
	case cfg.InsecureHTTP && (cfg.TLSCert != "" || cfg.TLSKey != ""):
		return errors.New("--insecure-http with --tls-cert/--tls-key: choose HTTPS or plain HTTP, not both")
	case !cfg.InsecureHTTP && (cfg.TLSCert == "" || cfg.TLSKey == ""):
		return errors.New("--tls-cert and --tls-key are required (plain HTTP only with --insecure-http)")
	}
	if cfg.Store != "" {
		if _, _, err := storeKind(cfg.Store); err != nil {
			return err
		}
	}
	if cfg.Issuer != "" {
		if _, err := api.ParseControlURL(cfg.Issuer, cfg.InsecureHTTP); err != nil {
			return fmt.Errorf("--issuer: %w; want control's public base URL, e.g. https://198.51.100.10", err)
		}
	}
	return cfg.checkOIDC()
}

func (cfg *Config) checkOIDC() error {
	if !cfg.OIDC.Enabled() {
		if cfg.OIDCAccount != "" {
			return errors.New("--oidc-account without --oidc-issuer: name the identity provider its users sign in through")
		}
		return nil
	}
	if err := cfg.OIDC.Check(); err != nil {
		return err
	}
	if cfg.OIDCAccount == "" {
		return fmt.Errorf("--oidc-issuer %s needs --oidc-account: the account (its AID) the provider's users are created in", cfg.OIDC.Issuer)
	}
	return nil
}

// issuer derives control's public URL from the listen address when none is
// given: the host (localhost for a wildcard) and the port unless default.
func issuer(listen string, insecure bool) string {
	scheme, def := "https", "443"
	if insecure {
		scheme, def = "http", "80"
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host, port = listen, def
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	if port == def {
		return scheme + "://" + bracket(host)
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

func bracket(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	log, clk := cfg.fillDefaults()
	services, err := pool.NewServices(cfg.ServicePool)
	if err != nil {
		return fmt.Errorf("--service-pool: %w", err)
	}
	tlsCfg, err := loadTLS(cfg)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, &cfg, clk.Now, log)
	if err != nil {
		return err
	}
	defer st.Close()
	a := &assembly{cfg: cfg, log: log, clk: clk, st: st}
	if err := a.importSeed(ctx, services); err != nil {
		return err
	}
	if a.hub, err = newHub(ctx, st); err != nil {
		return err
	}
	if cfg.OnHub != nil {
		cfg.OnHub(a.hub)
	}
	stopListening, err := a.listenToReplicas(ctx)
	if err != nil {
		return err
	}
	defer stopListening()
	stopMetrics, err := a.startMetrics()
	if err != nil {
		return err
	}
	defer stopMetrics()
	if err := a.startAPI(ctx); err != nil {
		return err
	}
	defer a.api.Close()
	mux, err := a.routes(ctx)
	if err != nil {
		return err
	}
	return a.serve(ctx, mux, tlsCfg)
}

// fillDefaults fills in what cfg leaves unset, and returns the logger and
// the clock to use.
func (cfg *Config) fillDefaults() (*slog.Logger, clock.Clock) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.ReplicaName != "" {
		log = log.With("replica", cfg.ReplicaName)
	}
	if cfg.StoreWait <= 0 {
		cfg.StoreWait = 30 * time.Second
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	if cfg.Listen == "" {
		cfg.Listen = ":443"
	}
	if cfg.Issuer == "" {
		cfg.Issuer = issuer(cfg.Listen, cfg.InsecureHTTP)
	}
	cfg.Issuer = strings.TrimRight(cfg.Issuer, "/")
	if !cfg.ServicePool.IsValid() {
		cfg.ServicePool = netip.MustParsePrefix(api.DefaultServicePool)
	}
	return log, clk
}

// loadTLS is the HTTPS configuration, nil for plain HTTP.
func loadTLS(cfg Config) (*tls.Config, error) {
	if cfg.InsecureHTTP {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("load --tls-cert %s / --tls-key %s: %w", cfg.TLSCert, cfg.TLSKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// newHTTPServer is control's HTTP server around its mux.
func newHTTPServer(cfg Config, mux http.Handler, mets *metrics.Control, tlsCfg *tls.Config, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           outer(cfg, tlsCfg != nil, reqid.Handler(mets.Wrap(mux))),
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: long-polls hold answers for up to 300 s, and
		// streams for as long as they last.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		// An HTTP/2 connection that carries a stream and says nothing back
		// is pinged, and closed when the ping goes unanswered; one whose
		// frames cannot be written is closed (control/stream bounds each
		// write on HTTP/1.1 alike).
		HTTP2: &http.HTTP2Config{SendPingTimeout: time.Minute, PingTimeout: 15 * time.Second, WriteByteTimeout: 30 * time.Second},
	}
}

// outer is what every request passes before the mux. The request id
// first (inner): it copies the request to carry the id, and the metrics
// must see the request the API's mux then labels with its route pattern (a
// copy made above them would keep only "/v1/"). The replica's name and the
// client's address behind a balancer come before both, the body's
// deadline and HSTS before anything.
func outer(cfg Config, https bool, inner http.Handler) http.Handler {
	h := replicaHeader(cfg.ReplicaName, behindProxies(cfg.TrustedProxies, inner))
	d := cfg.BodyTimeout
	if d <= 0 {
		d = defaultBodyTimeout
	}
	h = bodyDeadline(d, h)
	if https {
		h = hsts(h)
	}
	return h
}

// newHub starts the hub from the versions in the store.
func newHub(ctx context.Context, st store.Store) (*hub.Hub, error) {
	var global uint64
	var versions map[string]uint64
	err := st.View(ctx, func(r store.Reader) error {
		var err error
		if global, err = r.GlobalVersion(); err != nil {
			return err
		}
		versions, err = r.AllTopicVersions()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load versions: %w", err)
	}
	return hub.New(global, versions), nil
}

// serveMetrics serves /metrics on cfg's metrics address until stop.
func serveMetrics(cfg Config, m *metrics.Control, log *slog.Logger) (stop func(), err error) {
	ln := cfg.MetricsListener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return nil, fmt.Errorf("--metrics-addr %s: %w", cfg.MetricsAddr, err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() { _ = srv.Serve(ln) }()
	log.Info("metrics serving", "addr", ln.Addr().String(), "path", "/metrics")
	return func() { _ = srv.Close() }, nil
}
