// Package vpnd is the privileged daemon on the laptop (`runos vpnd`): it owns
// the wg1 tunnel, the device key, the session handed over by the CLI or the
// desktop app, each cluster's connection and split DNS, and it serves the
// local API of vpnd/localapi.
//
// Its status is derived by one pure function (vpnd/state) from its inputs:
// the prefs, control's device map, control's errors and what the WireGuard
// device reports. The daemon only gathers inputs and applies what the
// derivation wants.
package vpnd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/platform/netmon"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/logring"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/store"
	"github.com/runos/vpn/vpnd/tunnel"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Config is what `runos vpnd` passes in from its flags.
type Config struct {
	StateDir  string // "" → platform.DefaultStateDir()
	Socket    string // "" → platform.SocketPath()
	CAFile    string // trusts control's CA; "" → $RUNOS_CA_FILE, else system roots
	Interface string // "" → "wg1"
	// AllowHTTP accepts sessions of an http:// control (--insecure-http,
	// tests only: the token would travel in clear text).
	AllowHTTP bool
	// Trust bounds what control may configure on this machine: the routes
	// (default: the VPN's pools) and DNS domains beyond each cluster's own.
	Trust  state.Trust
	Logger *slog.Logger
	// DNS makes the split-DNS configurator; nil means DNS mode "off".
	DNS func(iface string, log *slog.Logger) (dnsplit.Configurator, error)
	// Cleanup is dnsplit's crash clean-up; nil: none.
	Cleanup func(stateDir string, log *slog.Logger) error
	// Logs keeps the daemon's recent log lines (the Logger writes to it as
	// well) for GET /v1/logs; nil: none kept.
	Logs *logring.Ring
	// LongPoll follows control's device map by long-polls, as daemons
	// before push streams did (--long-poll), instead of one stream.
	LongPoll bool
	// MTU is the tunnel's MTU (--mtu); 0: tunnel.DefaultMTU (1420).
	MTU int
	// NetMon starts the network monitor, which leaves out the interfaces
	// ignore names (the tunnel); nil: network changes go unnoticed.
	NetMon func(ignore func(iface string) bool, log *slog.Logger) (NetMonitor, error)
	// RouteMTU looks up the MTU of the path to a VPN server's address
	// (platform/netmon.RouteMTU); nil: the monitor's uplink MTU stands for
	// every path. The tunnel's TCP clamp follows it.
	RouteMTU func(dst netip.Addr) (int, error)
}

// NetMonitor is platform/netmon's Monitor as the daemon uses it.
type NetMonitor interface {
	Changes() <-chan netmon.Change
	State() netmon.State
	Close() error
}

// DefaultInterface is the tunnel's name when Config.Interface is empty.
const DefaultInterface = "wg1"

func (c Config) withDefaults() Config {
	if c.StateDir == "" {
		c.StateDir = platform.DefaultStateDir()
	}
	if c.Socket == "" {
		c.Socket = platform.SocketPath()
	}
	if c.CAFile == "" {
		c.CAFile = os.Getenv("RUNOS_CA_FILE")
	}
	if c.Interface == "" {
		c.Interface = DefaultInterface
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return c
}

// Run serves until ctx ends, then undoes its changes: DNS, peers, routes,
// the interface and the socket. The session and the wanted clusters stay in
// prefs.json, so the next start reconnects them without a browser.
func Run(ctx context.Context, cfg Config) (err error) {
	cfg = cfg.withDefaults()
	log := cfg.Logger
	if daemonAnswers(cfg.Socket) {
		return fmt.Errorf("another daemon answers on %s: stop it first", cfg.Socket)
	}
	dir, key, err := openState(cfg)
	if err != nil {
		return err
	}
	h := newEngineHooks(cfg)
	eng, err := openTunnel(cfg, dir, key, h)
	if err != nil {
		_ = forgetTunnel(dir)
		return err
	}
	gc, restoreGC := paceGC(log, os.Getenv("GOGC")) // after the tunnel: its packet buffers are the live heap to pace for
	defer restoreGC()
	dns, dnsStatus := openDNS(cfg, eng.Name())
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	d := newDaemon(dctx, cfg, dir, key, eng, dns, h)
	d.in = state.Inputs{Version: version.Version, Interface: eng.Name(), DNS: dnsStatus, Trust: cfg.Trust}
	d.resume()

	ln, err := platform.Listen(cfg.Socket)
	if err != nil {
		d.teardown(dns, eng, dir)
		return fmt.Errorf("local API socket %s: %w", cfg.Socket, err)
	}
	done := make(chan struct{})
	srv := localAPIServer(cfg, d, dir, done)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	waitLoops := d.startLoops(dctx, cfg, eng.Name(), gc)
	log.Info("runos vpnd serving", "version", version.String(), "socket", cfg.Socket, "interface", eng.Name(),
		"stateDir", dir.Path, "dns", d.Status().DNS.Mode)

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("local API: %w", err)
	}
	close(done)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = srv.Shutdown(sctx) // closing the listener removes the socket file
	cancel()
	stop()
	waitLoops() // nothing applies a plan once the teardown starts
	d.mu.Lock()
	d.stopSyncLocked()
	d.mu.Unlock()
	d.teardown(dns, eng, dir)
	log.Info("runos vpnd stopped")
	return err
}

// openState opens the state directory, undoes whatever a crashed daemon
// left (interface, DNS), and returns the device key, with the tunnel's
// name recorded for the next start's clean-up.
func openState(cfg Config) (store.Dir, wgtypes.Key, error) {
	dir, err := store.Open(cfg.StateDir)
	if err != nil {
		return store.Dir{}, wgtypes.Key{}, err
	}
	if err := cleanup(cfg, dir); err != nil {
		return store.Dir{}, wgtypes.Key{}, fmt.Errorf("clean up after the previous daemon: %w", err)
	}
	key, err := dir.Key()
	if err != nil {
		return store.Dir{}, wgtypes.Key{}, err
	}
	if err := recordTunnel(dir, cfg.Interface); err != nil {
		return store.Dir{}, wgtypes.Key{}, err
	}
	return dir, key, nil
}

// engineHooks are what the engine asks of the daemon (relay tickets, asked
// of control with the daemon's session: a relay never sees the session)
// and tells it (path changes): values made before the daemon, which needs
// the engine.
type engineHooks struct {
	controls *controlClients
	relay    *relayTickets
	wakeRead chan struct{}
}

func newEngineHooks(cfg Config) engineHooks {
	caFile, allowHTTP := cfg.CAFile, cfg.AllowHTTP
	controls := &controlClients{dial: func(apiURL string) (*api.Client, error) {
		return api.NewClient(apiURL, "", caFile, api.AllowHTTP(allowHTTP))
	}}
	return engineHooks{
		controls: controls,
		relay:    &relayTickets{connect: controls.client},
		wakeRead: make(chan struct{}, 1),
	}
}

// kickRead wakes the daemon's read of the device (daemon.kickRead, before
// there is a daemon).
func (h engineHooks) kickRead() { kick(h.wakeRead) }

func openTunnel(cfg Config, dir store.Dir, key wgtypes.Key, h engineHooks) (*tunnel.Engine, error) {
	caFile := cfg.CAFile
	return tunnel.NewWith(cfg.Interface, key, cfg.Logger, tunnel.Options{
		MTU: cfg.MTU, RouteMTU: cfg.RouteMTU, RelayTLS: sync.OnceValues(func() (*tls.Config, error) { return relayTLS(caFile) }),
		RelayTicket:  h.relay.ticket,
		OnPathChange: h.kickRead,
		OnHandshake:  h.kickRead, // peerUp as soon as the device shows it, not at the next read
	})
}

// openDNS starts the split-DNS configurator; without one (not built in, or
// failed to start) the status says why.
func openDNS(cfg Config, iface string) (dnsplit.Configurator, dnsplit.Status) {
	if cfg.DNS == nil {
		return nil, dnsplit.Status{Mode: "off", Reason: "split DNS is not part of this build"}
	}
	dns, err := cfg.DNS(iface, cfg.Logger)
	if err != nil {
		cfg.Logger.Warn("split DNS unavailable: cluster names will not resolve over the tunnel", "err", err)
		return nil, dnsplit.Status{Mode: "off", Reason: "split DNS failed to start", Error: err.Error()}
	}
	return dns, dns.Status()
}

func newDaemon(ctx context.Context, cfg Config, dir store.Dir, key wgtypes.Key, eng *tunnel.Engine, dns dnsplit.Configurator, h engineHooks) *daemon {
	host, _ := os.Hostname()
	return &daemon{
		log: cfg.Logger, clock: time.Now, dir: dir, public: key.PublicKey(), hostname: host, goos: runtime.GOOS,
		eng: eng, dns: dns, mapWait: 60 * time.Second, backoffMin: 100 * time.Millisecond, backoffMax: 10 * time.Second,
		ctx: ctx, wakeRead: h.wakeRead, wakePending: make(chan struct{}, 1), relay: h.relay, counts: newCounters(time.Now()),
		allowHTTP: cfg.AllowHTTP, longPoll: cfg.LongPoll, apply: newApplier(),
		newControl: func(apiURL, token string) (control, error) {
			cl, err := h.controls.client(apiURL, token)
			if err != nil {
				return nil, err // no typed nil in the interface
			}
			return cl, nil
		},
	}
}

// resume takes the prefs of the last run and, with a live session, the
// map kept of it (the tunnels, routes and DNS come back at once, control
// or not), then starts syncing with control (which joins the wanted
// clusters again and replaces the kept map with its own).
func (d *daemon) resume() {
	prefs, err := d.dir.LoadPrefs()
	if err != nil {
		d.log.Error("prefs", "err", err)
	}
	d.readDevice() // returns with mu held
	defer d.mu.Unlock()
	d.in.Prefs = prefs
	d.restoreKeptLocked()
	d.updateLocked()
	if !d.in.SignedIn() {
		return
	}
	ctl, err := d.newControl(prefs.APIURL, prefs.AccessToken)
	if err != nil {
		d.in.ControlErr = err.Error()
	} else {
		d.log.Info("resuming the session", "user", prefs.User, "wanted", prefs.Wanted)
		d.startSyncLocked(ctl)
	}
	d.updateLocked()
}

func localAPIServer(cfg Config, d *daemon, dir store.Dir, done chan struct{}) *http.Server {
	return &http.Server{
		Handler:           (&server{d: d, policy: access.SystemPolicy(dir.Path), done: done, logs: cfg.Logs}).handler(),
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No ReadTimeout: it would cut the /v1/watch streams; bodies are
		// capped by size instead.
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
}

// startLoops starts the daemon's goroutines: the applier, the pending
// changes, the device reader, the network and sleep watch and the memory
// watch. wait returns once all have ended (after ctx).
func (d *daemon) startLoops(ctx context.Context, cfg Config, iface string, gc *gcPacer) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() { d.applyLoop(ctx) })
	wg.Go(func() { d.pendingLoop(ctx) })
	wg.Go(func() { d.readLoop(ctx) })
	watching := d.watchNetworkAndSleep(ctx, cfg, iface)           // netchange.go
	waitMemory := startMemoryWatch(ctx, d.log, d.eng.Traffic, gc) // gives memory back after bursts of traffic (trim.go)
	return func() {
		wg.Wait()
		watching()
		waitMemory()
	}
}

// teardown undoes every change: DNS first (it points into the tunnel), then
// the tunnel with its peers, routes and address.
func (d *daemon) teardown(dns dnsplit.Configurator, eng *tunnel.Engine, dir store.Dir) {
	if dns != nil {
		if err := dns.Close(); err != nil {
			d.log.Warn("revert split DNS", "err", err)
		}
	}
	if err := eng.Close(); err != nil {
		d.log.Warn("remove the tunnel", "err", err)
	}
	_ = forgetTunnel(dir)
}

// Cleanup undoes the changes a previous daemon recorded (`runos vpnd
// --cleanup`, run by the service after the daemon stops): a left-over
// tunnel interface and, through Config.Cleanup, DNS.
func Cleanup(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	if daemonAnswers(cfg.Socket) {
		return fmt.Errorf("the daemon is running (it answers on %s): stop the service first, it cleans up on its own", cfg.Socket)
	}
	dir, err := store.Open(cfg.StateDir)
	if err != nil {
		return err
	}
	if err := cleanup(cfg, dir); err != nil {
		return err
	}
	removeStaleSocket(cfg.Socket)
	cfg.Logger.Info("clean-up done", "stateDir", dir.Path)
	return nil
}

func daemonAnswers(socket string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := platform.Dial(ctx, socket)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// cleanup removes the interfaces a previous daemon recorded (and the one
// configured) unless a live process still serves them, then runs DNS's
// clean-up.
func cleanup(cfg Config, dir store.Dir) error {
	var errs []error
	for _, name := range tunnelNames(dir, cfg.Interface) {
		if uapiAlive(name) {
			errs = append(errs, fmt.Errorf("interface %s is in use by another WireGuard process: choose another with --interface", name))
			continue
		}
		if platform.InterfaceExists(name) {
			cfg.Logger.Info("removing a left-over tunnel interface", "interface", name)
		}
		if err := platform.DeleteInterface(name); err != nil {
			errs = append(errs, err)
		}
		removeStaleUAPI(name)
	}
	if cfg.Cleanup != nil {
		if err := cfg.Cleanup(dir.Path, cfg.Logger); err != nil {
			errs = append(errs, fmt.Errorf("dns clean-up: %w", err))
		}
	}
	if len(errs) == 0 {
		_ = forgetTunnel(dir)
	}
	return errors.Join(errs...)
}
