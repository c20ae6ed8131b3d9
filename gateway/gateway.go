// Package gateway is runos-gateway, the node agent: it follows control's
// GatewayMap for its node and, when the node hosts the cluster's VPN
// server (as active, standby during a move, or draining after one), runs
// the WireGuard server (gateway/wgserver) and the cluster DNS
// (gateway/clusterdns), and reports back: its public key, whether it is
// listening, the map version it acted on, and the peers' handshakes.
//
// One goroutine owns all state: maps from the long-poll, heartbeats,
// handshake reads and retries all arrive on channels to it. Reports are
// derived from that state by one function and posted by another goroutine
// so a slow control never delays serving.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/gateway/clusterdns"
	"github.com/runos/vpn/gateway/policyfilter"
	"github.com/runos/vpn/gateway/reach"
	"github.com/runos/vpn/gateway/relay"
	"github.com/runos/vpn/gateway/wgserver"
	"github.com/runos/vpn/internal/backoff"
	"github.com/runos/vpn/internal/fault"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Control is the part of control's API a gateway uses (*api.Client).
type Control interface {
	GatewayMap(ctx context.Context, since uint64, wait time.Duration) (*api.GatewayMap, error)
	GatewayReport(ctx context.Context, r api.GatewayReport) error
}

// Server is the WireGuard server as the agent drives it (*wgserver.Server).
type Server interface {
	Apply(wgserver.Spec) error
	ApplyPeers(wgserver.Spec) error // Apply's peers and port only (onlyPeersChange)
	State() (wgserver.State, error)
	Close() error
}

// DNS is the cluster DNS as the agent drives it (*clusterdns.Server).
type DNS interface {
	Set(*clusterdns.Zone) error
	Close() error
}

// Reach is the forwarding into the cluster as the agent drives it
// (*reach.Forwarder).
type Reach interface {
	Apply(reach.Spec) error
	Close() error
}

// Defaults of Config.
const (
	DefaultInterface = "wgvpn"
	DefaultHeartbeat = 10 * time.Second
	DefaultPollWait  = 60 * time.Second
)

// Config is what Run needs. Side effects (control, the server, DNS, the
// address detection) are injected so the agent's logic is testable.
type Config struct {
	Control   Control
	NodeID    string      // checked against the map: a token for another node is a fatal error
	Key       wgtypes.Key // the node's private key; only its public key leaves this package
	Interface string      // DefaultInterface when empty
	Heartbeat time.Duration
	PollWait  time.Duration // long-poll hold asked of control
	// LongPoll follows the map by long-polls, as gateways before push
	// streams did (--long-poll), instead of one stream.
	LongPoll bool
	Version  string // reported software version
	Logger   *slog.Logger

	// OpenServer opens the WireGuard server; nil means wgserver.Open.
	OpenServer func(name string, key wgtypes.Key, log *slog.Logger) (Server, error)
	// DNS is the cluster DNS; nil means a clusterdns.Server on port 53.
	DNS DNS
	// PublicIP detects the node's public address ("" when none); nil: not reported.
	PublicIP func() string
	// Metrics receives what the gateway's metrics count (gateway/metrics); nil: none.
	Metrics Metrics
	// Inside is what the node's configuration says lies inside the
	// cluster, reported to control (empty: nothing declared).
	Inside api.ClusterInside
	// Reach forwards devices into the cluster's declared prefixes while
	// the node serves; nil: no forwarding (devices reach the node only).
	Reach Reach
	// Relay, when set, is the Bind the server runs on: UDP and the relay
	// streams of gateway/relay. The agent keeps its streams to the
	// server's peers and closes them when it stops serving.
	Relay *relay.Bind
	// StateDir keeps the last map control sent (kept.go), served from
	// after a restart until control answers; "" keeps none.
	StateDir string
}

// Metrics receives the gateway's facts for its Prometheus metrics.
type Metrics interface {
	// Serving is the role served (active, standby, draining; "" when not
	// serving) and how many peers the server has.
	Serving(role string, peers int)
	// Handshakes counts new handshakes seen on the server.
	Handshakes(n int)
	// Traffic adds bytes received from and sent to devices.
	Traffic(rx, tx uint64)
	// ControlAnswered records that control answered (a map or a report).
	ControlAnswered(at time.Time)
	// PolicyDropped counts a packet from a device the access policy refused.
	PolicyDropped()
	// PolicyRuleDrops gives the refusals per rule (policyfilter.RuleDrops),
	// read at each scrape.
	PolicyRuleDrops(read func() []policyfilter.RuleDrops)
}

type noMetrics struct{}

func (noMetrics) Serving(string, int)       {}
func (noMetrics) Handshakes(int)            {}
func (noMetrics) Traffic(uint64, uint64)    {}
func (noMetrics) ControlAnswered(time.Time) {}
func (noMetrics) PolicyDropped()            {}

func (noMetrics) PolicyRuleDrops(func() []policyfilter.RuleDrops) {}

type agent struct {
	cfg Config
	log *slog.Logger
	pub wgtypes.Key

	want   *api.GatewayMap // latest map from control (or kept from an earlier run: kept)
	kept   bool            // want is the map kept on disk: control has not answered this run
	keptAt time.Time       // when the kept map on disk was received (zero: none written)
	onDisk *api.GatewayMap // the map the kept file holds, as far as this run knows (nil: unknown)
	// endpoints are the served devices' last endpoints as kept on disk;
	// reachFirst those of the kept map to handshake to after a restart.
	endpoints  map[wgtypes.Key]netip.AddrPort
	reachFirst map[wgtypes.Key]netip.AddrPort
	expiry     time.Time       // when the next served peer's session ends (zero: none)
	applied    *plan           // what server and DNS were last set to; nil: not serving
	srv        Server          // open while serving
	state      *wgserver.State // last read of the server
	mapErr     error           // why want was refused (malformed: retrying cannot help)
	applyErr   error           // why want is not (fully) in effect here (retried)
	stateErr   error           // why the server could not be read
	watch      watch
	retry      *backoff.Backoff
	publicIP   atomic.Pointer[string]
	started    time.Time                        // this run's start, in every report: a new one tells devices to handshake again
	traffic    map[wgtypes.Key]wgserver.Traffic // the counters at the last read of this server (metrics)
	filter     *policyfilter.Filter             // the access policy on packets from devices
}

// Run follows control until ctx ends, then stops serving (the interface,
// its routes and the DNS go away) and tells control it no longer listens.
// It returns an error only for what retrying cannot fix.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Control == nil {
		return errors.New("gateway: no control client")
	}
	if cfg.Interface == "" {
		cfg.Interface = DefaultInterface
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.PollWait <= 0 {
		cfg.PollWait = DefaultPollWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	filter := &policyfilter.Filter{Dropped: cfg.Metrics.PolicyDropped}
	cfg.Metrics.PolicyRuleDrops(filter.RuleDrops)
	if cfg.OpenServer == nil {
		cfg.OpenServer = func(name string, key wgtypes.Key, log *slog.Logger) (Server, error) {
			o := wgserver.Options{WrapTUN: filter.Wrap}
			if cfg.Relay != nil {
				o.Bind = cfg.Relay
			}
			return wgserver.OpenWith(name, key, o, log)
		}
	}
	if cfg.DNS == nil {
		cfg.DNS = clusterdns.NewServer(clusterdns.Port, cfg.Logger)
	}
	a := &agent{cfg: cfg, log: cfg.Logger, pub: cfg.Key.PublicKey(), retry: backoff.New(backoff.DefaultMin, backoff.DefaultMax), started: time.Now().UTC(),
		filter: filter}
	return a.run(ctx)
}

func (a *agent) run(ctx context.Context) error {
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	maps := newMailbox[*api.GatewayMap]()
	reports := newMailbox[api.GatewayReport]()
	go a.follow(pollCtx, maps)
	go a.sendReports(pollCtx, reports)
	if a.cfg.PublicIP != nil {
		go a.detectPublicIP(pollCtx)
	}
	heartbeat := time.NewTicker(a.cfg.Heartbeat)
	defer heartbeat.Stop()
	var watchTick *time.Ticker
	var watchC <-chan time.Time
	var retryTimer *time.Timer
	var retryC <-chan time.Time
	expiry := newAlarm()
	defer func() {
		if watchTick != nil {
			watchTick.Stop()
		}
		if retryTimer != nil {
			retryTimer.Stop()
		}
		expiry.stop()
	}()
	// after runs once an event was handled: publish the report and arm or
	// disarm the watch and the retry, all derived from the state.
	after := func() {
		reports.put(a.report())
		a.observe()
		if a.watching(time.Now()) {
			if watchTick == nil {
				watchTick = time.NewTicker(watchEvery)
				watchC = watchTick.C
			}
		} else if watchTick != nil {
			watchTick.Stop()
			watchTick, watchC = nil, nil
		}
		expiry.set(a.expiry)
		if a.applyErr != nil {
			if retryC == nil {
				retryTimer = time.NewTimer(a.retry.Next())
				retryC = retryTimer.C
			}
		} else {
			a.retry.Reset()
			if retryTimer != nil {
				retryTimer.Stop()
				retryTimer, retryC = nil, nil
			}
		}
	}
	a.restoreKept()
	after()
	var keepAfter *api.GatewayMap // a map to keep on disk once its report is out
	for {
		select {
		case <-ctx.Done():
			a.stopServing("the gateway is stopping")
			a.finalReport()
			return nil
		case m := <-maps.ch:
			if m.NodeID != "" && a.cfg.NodeID != "" && m.NodeID != a.cfg.NodeID {
				a.stopServing("the token belongs to another node")
				return fmt.Errorf("control says this enrollment token belongs to node %s, not %s: check --node-id and --token-file", m.NodeID, a.cfg.NodeID)
			}
			a.log.Debug("map", "version", m.Version, "serve", m.Serve != nil)
			if a.kept {
				a.log.Info("control answers: its map replaces the kept one", "version", m.Version)
			}
			a.want, a.kept = m, false
			if keepsLater(a.onDisk, m) {
				keepAfter = m // once reported: see keepsLater
			} else {
				a.keep(m)
			}
			a.reconcile()
		case <-expiry.c():
			a.reconcile() // a peer's session ended: it goes
		case <-retryC:
			retryTimer, retryC = nil, nil
			a.reconcile()
		case <-heartbeat.C:
			a.refresh()
		case <-watchC:
			if len(a.refresh()) == 0 && a.watching(time.Now()) {
				continue // nothing new: no report, keep watching
			}
		}
		after()
		if keepAfter != nil && a.onDisk != keepAfter {
			a.keepReported(keepAfter)
			keepAfter = nil
		}
	}
}

// keepReported keeps a map that only added peers once its report is out
// (keepsLater).
func (a *agent) keepReported(m *api.GatewayMap) {
	if a.onDisk != nil && len(m.Serve.Peers) > len(a.onDisk.Serve.Peers) {
		// A join's report is queued (perhaps sent); the kept file still
		// holds the map before it (e2e/gatewayfault_test.go).
		fault.Point("gateway-join-unkept")
	}
	a.keep(m)
}

// reconcile makes the server and DNS match want, less the peers whose
// sessions have ended.
func (a *agent) reconcile() {
	m, next := unexpired(a.want, time.Now(), a.kept)
	a.expiry = next
	p, err := planFor(m)
	a.mapErr = err
	if err != nil {
		// What is in effect stays. A pending retry would only re-read
		// this map, so none runs until control sends a good one.
		a.applyErr = nil
		a.log.Warn("map refused; nothing changed", "err", err)
		return
	}
	if p != nil && p.policyErr != nil {
		a.mapErr = p.policyErr // reported to control as the map's error
		a.log.Warn("access policy refused; devices' packets refused, peers applied", "err", p.policyErr)
	}
	if p == nil {
		a.applyErr = nil
		a.stopServing("the map no longer asks this node to serve")
		return
	}
	prev := a.applied
	fresh := false
	if a.srv == nil {
		srv, err := a.cfg.OpenServer(a.cfg.Interface, a.cfg.Key, a.log)
		if err != nil {
			a.applyErr = fmt.Errorf("serve %s: %w", p.cid, err)
			a.log.Warn("cannot serve; will retry", "err", a.applyErr)
			return
		}
		a.srv, fresh = srv, true
	}
	// The filters first: a new peer's packets are checked from its first,
	// and a rule removed cuts what it allowed before anything else moves.
	a.filter.Set(p.filters, p.wg.Address.Addr(), p.reach.Mapped)
	// A map that only adds devices (a join: its answer waits for this
	// report) leaves the interface as the last map set it, unless that one
	// failed; any other map sets it again.
	onlyPeers := !fresh && a.applyErr == nil && onlyPeersChange(prev, p)
	apply := a.srv.Apply
	if onlyPeers {
		apply = a.srv.ApplyPeers
	}
	if err := apply(p.wg); err != nil {
		a.applyErr = fmt.Errorf("serve %s: %w", p.cid, err)
		a.log.Warn("cannot serve; will retry", "err", a.applyErr)
		if fresh {
			// Never leave a half-made interface behind; the retry opens anew.
			a.closeServer()
		}
		a.refresh()
		return
	}
	a.applyErr = nil
	if onlyPeers && len(p.wg.Peers) > len(prev.wg.Peers) {
		// A join's device is in the server; the report its answer waits
		// for has not been put out, nor the map kept (e2e/gatewayfault_test.go).
		fault.Point("gateway-join-applied")
	}
	if a.cfg.Relay != nil {
		a.cfg.Relay.KeepOnly(peerKeys(p))
	}
	if err := a.cfg.DNS.Set(p.zone); err != nil {
		a.applyErr = fmt.Errorf("serve %s: %w", p.cid, err)
		a.log.Warn("cluster dns not serving; will retry", "err", err)
	}
	if a.cfg.Reach != nil {
		spec := p.reach
		spec.Interface = a.cfg.Interface
		if err := a.cfg.Reach.Apply(spec); err != nil {
			a.applyErr = errors.Join(a.applyErr, fmt.Errorf("serve %s: %w", p.cid, err))
			a.log.Warn("forwarding into the cluster not in place; will retry", "err", err)
		}
	}
	a.applied = p
	switch {
	case prev == nil:
		a.log.Info("serving", "cid", p.cid, "service", p.serviceID, "role", p.role, "move", p.moveID,
			"interface", a.cfg.Interface, "port", p.wg.Port, "address", p.wg.Address.String(), "peers", len(p.wg.Peers),
			"publicKey", a.pub.String())
	case prev.role != p.role:
		a.log.Info("role changed", "cid", p.cid, "service", p.serviceID, "from", prev.role, "to", p.role, "move", p.moveID)
	}
	if prev == nil || prev.role != p.role || !samePeers(prev, p) {
		a.watch = newWatch(time.Now())
	}
	a.reachKept()
	if fresh || a.state == nil || !addsPeers(prev, p) {
		a.refresh()
	}
	// Else the map only added peers to a running server: a read now would
	// show nothing new (the new devices have not handshaken yet, and the
	// watch armed above reads every watchEvery until they have), and the
	// report a joining device waits for (control/server/joinack.go) goes
	// without it, 0.6–4.7 ms sooner.
}

// refresh reads the server and returns the peers with a new handshake,
// logging each one.
func (a *agent) refresh() []wgtypes.Key {
	if a.srv == nil {
		a.state, a.stateErr = nil, nil
		return nil
	}
	prev := a.handshakes()
	st, err := a.srv.State()
	if err != nil {
		a.stateErr = err
		a.state = nil
		return nil
	}
	a.stateErr = nil
	a.state = &st
	a.keepEndpoints(st.Endpoints)
	fresh := newHandshakes(prev, st.Handshakes)
	a.cfg.Metrics.Handshakes(len(fresh))
	a.cfg.Metrics.Traffic(trafficGrown(a.traffic, st.Traffic))
	a.traffic = st.Traffic
	for _, k := range fresh {
		dev := ""
		if a.applied != nil {
			dev = a.applied.peerIDs[k]
		}
		a.log.Info("handshake", "device", dev, "key", k.String(), "at", st.Handshakes[k].UTC().Format(time.RFC3339Nano))
	}
	return fresh
}

// observe tells the metrics what is served now.
func (a *agent) observe() {
	if a.applied == nil || a.srv == nil {
		a.cfg.Metrics.Serving("", 0)
		return
	}
	a.cfg.Metrics.Serving(a.applied.role, len(a.applied.wg.Peers))
}

// trafficGrown is what the peers' byte counters grew by since prev; a
// counter that went down belongs to a peer added again (from zero).
func trafficGrown(prev, cur map[wgtypes.Key]wgserver.Traffic) (rx, tx uint64) {
	for k, c := range cur {
		p := prev[k]
		if c.Rx >= p.Rx {
			rx += uint64(c.Rx - p.Rx)
		} else {
			rx += uint64(max(c.Rx, 0))
		}
		if c.Tx >= p.Tx {
			tx += uint64(c.Tx - p.Tx)
		} else {
			tx += uint64(max(c.Tx, 0))
		}
	}
	return rx, tx
}

func (a *agent) handshakes() map[wgtypes.Key]time.Time {
	if a.state == nil {
		return nil
	}
	return a.state.Handshakes
}

func (a *agent) watching(now time.Time) bool {
	if a.srv == nil || a.applied == nil {
		return false
	}
	return a.watch.pending(now, a.applied.wg.Peers, a.handshakes())
}

func (a *agent) stopServing(why string) {
	if a.srv == nil {
		return
	}
	_ = a.cfg.DNS.Close()
	if a.cfg.Reach != nil {
		if err := a.cfg.Reach.Close(); err != nil {
			a.log.Warn("stopping forwarding into the cluster", "err", err)
		}
	}
	a.closeServer()
	if a.cfg.Relay != nil {
		a.cfg.Relay.CloseStreams("the node stopped serving: " + why)
	}
	if a.applied != nil {
		a.log.Info("stopped serving", "cid", a.applied.cid, "service", a.applied.serviceID, "why", why)
	}
	a.applied = nil
	a.watch = watch{}
}

func (a *agent) closeServer() {
	if err := a.srv.Close(); err != nil {
		a.log.Warn("closing the interface", "interface", a.cfg.Interface, "err", err)
	}
	a.srv, a.state, a.stateErr, a.traffic = nil, nil, nil, nil
}

func (a *agent) report() api.GatewayReport {
	in := reportInputs{
		publicKey: a.pub,
		version:   a.cfg.Version,
		startedAt: a.started,
		state:     a.state,
		errs:      []error{a.mapErr, a.applyErr, a.stateErr},
	}
	if !a.cfg.Inside.Empty() {
		in.inside = &a.cfg.Inside
	}
	if ip := a.publicIP.Load(); ip != nil {
		in.publicIP = *ip
	}
	if a.want != nil {
		in.mapVersion = a.want.Version
		in.serve = a.want.Serve
	}
	return buildReport(in)
}

// finalReport tells control, best effort and briefly, that this gateway no
// longer listens, so a move or the node status need not wait for a timeout.
func (a *agent) finalReport() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := a.cfg.Control.GatewayReport(ctx, a.report()); err != nil {
		a.log.Debug("final report not sent", "err", err)
	}
}

// detectPublicIP refreshes the detected public address now and then; it
// runs apart from the loop because detection may wait on the network.
func (a *agent) detectPublicIP(ctx context.Context) {
	for {
		ip := a.cfg.PublicIP()
		a.publicIP.Store(&ip)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
		}
	}
}
