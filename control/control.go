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
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/console"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/metrics"
	"github.com/runos/vpn/control/notify"
	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/reqid"
	"github.com/runos/vpn/control/seed"
	"github.com/runos/vpn/control/server"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/internal/secretfile"
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
	BcryptCost       int // for plain passwords in the world file; 0 means 12

	MaxDevicesPerUser int           // 0: 20
	DeviceIdleTTL     time.Duration // 0: 30 days

	// Slow clients (docs/internals.md "Slow clients"): a request's body
	// must arrive within BodyTimeout of its headers (0: 10s); one address
	// holds at most MaxConnsPerAddr connections at once (0: 512; -1: no
	// cap), TrustedProxies exempt (behind a balancer every connection
	// comes from it: the balancer limits its clients); one token holds at
	// most MaxHeldPerToken streams and long-polls (0: 100).
	BodyTimeout     time.Duration
	MaxConnsPerAddr int
	MaxHeldPerToken int

	// Push streams (docs/internals.md "Push"): the heartbeat period (0:
	// 15s), and NoStreams answers stream requests as long-polls.
	StreamHeartbeat time.Duration
	NoStreams       bool

	Logger *slog.Logger
	Clock  clock.Clock // nil: the real clock

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
	services, err := pool.NewServices(cfg.ServicePool)
	if err != nil {
		return fmt.Errorf("--service-pool: %w", err)
	}

	var tlsCfg *tls.Config
	if !cfg.InsecureHTTP {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("load --tls-cert %s / --tls-key %s: %w", cfg.TLSCert, cfg.TLSKey, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}

	st, err := openStore(ctx, &cfg, clk.Now, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if cfg.Seed != "" {
		// It holds passwords and tokens: one other users can read is refused.
		data, err := secretfile.Read(cfg.Seed)
		if err != nil {
			return fmt.Errorf("--seed: %w", err)
		}
		w, err := seed.Parse(data)
		if err != nil {
			return fmt.Errorf("--seed %s: %w", cfg.Seed, err)
		}
		sum, err := seed.Import(ctx, st, w, seed.Options{Services: services, BcryptCost: cfg.BcryptCost, Now: clk.Now()})
		if err != nil {
			return fmt.Errorf("--seed %s: %w", cfg.Seed, err)
		}
		log.Info("world file imported", "file", cfg.Seed, "created", sum.Created, "existing", sum.Existing)
	}
	h, err := newHub(ctx, st)
	if err != nil {
		return err
	}
	if cfg.OnHub != nil {
		cfg.OnHub(h)
	}
	var listening func() bool
	if st.pg != nil {
		// Other replicas' changes reach this one's hub; it is ready once
		// it listens (readyz).
		l := notify.New(notify.Config{Connect: st.pg.Conn, Store: st, Hub: h, Origin: st.pg.Origin(), Logger: log})
		lctx, stopListening := context.WithCancel(context.WithoutCancel(ctx))
		done, heard := make(chan struct{}), make(chan struct{})
		go func() { defer close(done); l.Run(lctx, func() { close(heard) }) }()
		defer func() { stopListening(); <-done }()
		listening = l.Connected
		// Serve once listening (a balancer would not send anything
		// before readyz says so anyway); a listener that cannot connect
		// yet keeps trying, and readyz says not ready meanwhile.
		select {
		case <-heard:
		case <-time.After(cfg.StoreWait):
			log.Warn("not listening for other replicas' changes yet; serving, not ready")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var mets *metrics.Control
	var sst store.Store = st
	var srvMetrics server.Metrics
	var oaMetrics oauth.Metrics
	if cfg.MetricsAddr != "" || cfg.MetricsListener != nil {
		mets = metrics.New(st, clk.Now)
		sst = mets.Store(st)
		h.ObserveFanOut(mets.FanOut)
		srvMetrics, oaMetrics = mets, mets
		stop, err := serveMetrics(cfg, mets, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	// Relay tickets are signed with the store's secret: one issued by one
	// replica is checked by another.
	relaySecret, err := st.Secret(ctx, "relay-ticket", 32)
	if err != nil {
		return fmt.Errorf("relay tickets' secret: %w", err)
	}
	api, err := server.New(server.Config{
		Store: sst, Hub: h, Clock: clk, Logger: log, Metrics: srvMetrics, Shared: st.pg != nil,
		SessionTTL: cfg.SessionTTL, DevicePool: cfg.DevicePool, ServicePool: cfg.ServicePool,
		MoveReadyTimeout: cfg.MoveReadyTimeout, MoveDeadline: cfg.MoveDeadline, HeartbeatTimeout: cfg.HeartbeatTimeout,
		MaxDevicesPerUser: cfg.MaxDevicesPerUser, DeviceIdleTTL: cfg.DeviceIdleTTL,
		StreamHeartbeat: cfg.StreamHeartbeat, NoStreams: cfg.NoStreams, MaxHeldPerToken: cfg.MaxHeldPerToken,
		RelaySecret: relaySecret,
	})
	if err != nil {
		return err
	}
	defer api.Close()
	if err := api.Start(ctx); err != nil {
		return err
	}
	// The login pages' CSRF secret is the store's: a form served by one
	// replica is accepted by another.
	secret, err := st.Secret(ctx, "csrf", 32)
	if err != nil {
		return fmt.Errorf("login pages' secret: %w", err)
	}
	oa, err := oauth.New(oauth.Config{Issuer: cfg.Issuer, Backend: api, Store: st.Grants(), Logger: log, Now: clk.Now, Metrics: oaMetrics, Secret: secret})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api.Handler())
	// The sign-in's audit entry names the address it came from.
	withSource := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		oa.Handler().ServeHTTP(w, r.WithContext(audit.WithSource(r.Context(), r.RemoteAddr)))
	})
	mux.Handle("/oauth/", withSource)
	mux.Handle("/.well-known/", oa.Handler())
	con, err := console.New(console.Config{Issuer: cfg.Issuer, API: api.Handler(), OAuth: withSource, Hub: h, Logger: log, Now: clk.Now})
	if err != nil {
		return err
	}
	mux.Handle("/console", con.Handler())
	mux.Handle("/console/", con.Handler())
	mux.HandleFunc("GET /healthz", healthz)
	mux.Handle("GET /readyz", readyz(st.Ping, listening))

	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("--listen %s: %w", cfg.Listen, err)
		}
	}
	ln = limitConns(ln, cfg, log)
	srv := &http.Server{
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
	errc := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	storeURL := cfg.Store
	if storeURL == "" {
		storeURL = "sqlite:" + cfg.DB
	}
	log.Info("runos-control serving", "url", cfg.Issuer, "listen", ln.Addr().String(), "store", RedactStore(storeURL), "tls", tlsCfg != nil)
	if cfg.Serving != nil {
		cfg.Serving(api)
	}
	if cfg.Ready != nil {
		cfg.Ready(cfg.Issuer)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("runos-control shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	api.Close()
	// Long-polls would hold Shutdown for minutes: close what is still open.
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	return nil
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
