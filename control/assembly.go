package control

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/console"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/metrics"
	"github.com/runos/vpn/control/notify"
	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/oidc"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/seed"
	"github.com/runos/vpn/control/server"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/internal/secretfile"
)

// assembly is what Run's steps build, each on what the ones before it
// left: the store first, then the hub, the metrics, the API.
type assembly struct {
	cfg Config
	log *slog.Logger
	clk clock.Clock
	st  opened
	hub *hub.Hub
	// listening says whether other replicas' changes reach the hub (for
	// readyz); nil with a store of one replica's own.
	listening func() bool
	// mets measures control; nil when no metrics are served.
	mets *metrics.Control
	api  *server.Server
	// up is the identity provider, when one is configured.
	up *oidc.Upstream
}

// importSeed imports the world file, if one is given.
func (a *assembly) importSeed(ctx context.Context, services pool.Services) error {
	if a.cfg.Seed == "" {
		return nil
	}
	// It holds passwords and tokens: one other users can read is refused.
	data, err := secretfile.Read(a.cfg.Seed)
	if err != nil {
		return fmt.Errorf("--seed: %w", err)
	}
	w, err := seed.Parse(data)
	if err != nil {
		return fmt.Errorf("--seed %s: %w", a.cfg.Seed, err)
	}
	sum, err := seed.Import(ctx, a.st, w, seed.Options{Services: services, BcryptCost: a.cfg.BcryptCost, Now: a.clk.Now()})
	if err != nil {
		return fmt.Errorf("--seed %s: %w", a.cfg.Seed, err)
	}
	a.log.Info("world file imported", "file", a.cfg.Seed, "created", sum.Created, "existing", sum.Existing)
	return nil
}

// listenToReplicas feeds other replicas' changes to the hub when the store
// is shared (PostgreSQL), and returns how to stop it.
func (a *assembly) listenToReplicas(ctx context.Context) (stop func(), err error) {
	if a.st.pg == nil {
		return func() {}, nil
	}
	l := notify.New(notify.Config{Connect: a.st.pg.Conn, Store: a.st, Hub: a.hub, Origin: a.st.pg.Origin(), Logger: a.log})
	lctx, stopListening := context.WithCancel(context.WithoutCancel(ctx))
	done, heard := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); l.Run(lctx, func() { close(heard) }) }()
	stop = func() { stopListening(); <-done }
	a.listening = l.Connected
	// Serve once listening (a balancer would not send anything before
	// readyz says so anyway); a listener that cannot connect yet keeps
	// trying, and readyz says not ready meanwhile.
	select {
	case <-heard:
	case <-time.After(a.cfg.StoreWait):
		a.log.Warn("not listening for other replicas' changes yet; serving, not ready")
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
	return stop, nil
}

// startMetrics serves /metrics when the configuration asks for it, and
// returns how to stop serving.
func (a *assembly) startMetrics() (stop func(), err error) {
	if a.cfg.MetricsAddr == "" && a.cfg.MetricsListener == nil {
		return func() {}, nil
	}
	a.mets = metrics.New(a.st, a.clk.Now)
	a.hub.ObserveFanOut(a.mets.FanOut)
	return serveMetrics(a.cfg, a.mets, a.log)
}

// startAPI builds the /v1 API (measured, when metrics are served) and
// starts its background work; Run closes it.
func (a *assembly) startAPI(ctx context.Context) error {
	var sst store.Store = a.st
	var srvMetrics server.Metrics
	if a.mets != nil {
		sst, srvMetrics = a.mets.Store(a.st), a.mets
	}
	cfg := a.cfg
	// Relay tickets are signed with the store's secret: one issued by one
	// replica is checked by another.
	relaySecret, err := a.st.Secret(ctx, "relay-ticket", 32)
	if err != nil {
		return fmt.Errorf("relay tickets' secret: %w", err)
	}
	// The identity provider's discovery document is read now, so that a
	// wrong issuer stops control at start rather than at the first sign-in.
	var idc server.IdentityChecker
	if cfg.OIDC.Enabled() {
		if a.up, err = oidc.New(ctx, cfg.OIDC, cfg.Issuer+oauth.PathOIDCCallback, cfg.OIDCClient); err != nil {
			return err
		}
		idc = a.up
	}
	api, err := server.New(server.Config{
		Store: sst, Hub: a.hub, Clock: a.clk, Logger: a.log, Metrics: srvMetrics, Shared: a.st.pg != nil,
		SessionTTL: cfg.SessionTTL, DevicePool: cfg.DevicePool, ServicePool: cfg.ServicePool,
		MoveReadyTimeout: cfg.MoveReadyTimeout, MoveDeadline: cfg.MoveDeadline, HeartbeatTimeout: cfg.HeartbeatTimeout,
		JoinAckTimeout: cfg.JoinAckTimeout, MaxDevicesPerUser: cfg.MaxDevicesPerUser, DeviceIdleTTL: cfg.DeviceIdleTTL,
		StreamHeartbeat: cfg.StreamHeartbeat, NoStreams: cfg.NoStreams, MaxHeldPerToken: cfg.MaxHeldPerToken,
		RelaySecret: relaySecret, IdentityAccount: cfg.OIDCAccount, Identity: idc, IdentityCheckEvery: cfg.OIDCCheckEvery,
	})
	if err != nil {
		return err
	}
	if err := api.Start(ctx); err != nil {
		api.Close()
		return err
	}
	a.api = api
	return nil
}

// routes is control's one mux: the API, the OAuth authorization server,
// the console and the health endpoints.
func (a *assembly) routes(ctx context.Context) (*http.ServeMux, error) {
	// The login pages' CSRF secret is the store's: a form served by one
	// replica is accepted by another.
	secret, err := a.st.Secret(ctx, "csrf", 32)
	if err != nil {
		return nil, fmt.Errorf("login pages' secret: %w", err)
	}
	var oaMetrics oauth.Metrics
	if a.mets != nil {
		oaMetrics = a.mets
	}
	oaCfg := oauth.Config{Issuer: a.cfg.Issuer, Backend: a.api, Store: a.st.Grants(), Logger: a.log, Now: a.clk.Now, Metrics: oaMetrics, Secret: secret}
	a.upstream(&oaCfg)
	oa, err := oauth.New(oaCfg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", a.api.Handler())
	// The sign-in's audit entry names the address it came from.
	withSource := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		oa.Handler().ServeHTTP(w, r.WithContext(audit.WithSource(r.Context(), r.RemoteAddr)))
	})
	mux.Handle("/oauth/", withSource)
	mux.Handle("/.well-known/", oa.Handler())
	con, err := console.New(console.Config{Issuer: a.cfg.Issuer, API: a.api.Handler(), OAuth: withSource, Hub: a.hub, Logger: a.log, Now: a.clk.Now})
	if err != nil {
		return nil, err
	}
	mux.Handle("/console", con.Handler())
	mux.Handle("/console/", con.Handler())
	mux.HandleFunc("GET /healthz", healthz)
	mux.Handle("GET /readyz", readyz(a.st.Ping, a.listening))
	return mux, nil
}

// upstream sets the login page's identity provider, when one is
// configured (startAPI made it).
func (a *assembly) upstream(oc *oauth.Config) {
	if a.up == nil {
		return
	}
	oc.Upstream = a.up
	if u, err := url.Parse(a.cfg.OIDC.Issuer); err == nil {
		oc.UpstreamName = u.Host
	}
}

// serve serves mux until ctx ends, then shuts down.
func (a *assembly) serve(ctx context.Context, mux http.Handler, tlsCfg *tls.Config) error {
	cfg, log := a.cfg, a.log
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("--listen %s: %w", cfg.Listen, err)
		}
	}
	ln = limitConns(ln, cfg, log)
	srv := newHTTPServer(cfg, mux, a.mets, tlsCfg, log)
	errc := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			errc <- srv.Serve(gateTLS(ln, srv, a.mets, log))
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
		cfg.Serving(a.api)
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
	a.api.Close()
	// Long-polls would hold Shutdown for minutes: close what is still open.
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	return nil
}
