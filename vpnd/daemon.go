package vpnd

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/store"
	"github.com/runos/vpn/vpnd/wgcfg"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// control is the part of api's Client the daemon uses (a seam for
// tests; *api.Client is the real one).
type control interface {
	Me(ctx context.Context) (*api.Me, error)
	EndSession(ctx context.Context) error
	Clusters(ctx context.Context) ([]api.Cluster, error)
	RegisterDevice(ctx context.Context, r api.RegisterDeviceRequest) (*api.Device, error)
	JoinCluster(ctx context.Context, deviceID, cid string) (*api.ClusterConfig, error)
	LeaveCluster(ctx context.Context, deviceID, cid string) error
	DeviceMap(ctx context.Context, deviceID string, since uint64, wait time.Duration) (*api.DeviceMap, error)
	MyDevices(ctx context.Context) ([]api.DeviceDetail, error)
	RemoveMyDevice(ctx context.Context, id string) error
}

// engine is the tunnel (vpnd/tunnel.Engine in production).
type engine interface {
	Apply(wgcfg.Config) error
	SetPrivateKey(wgtypes.Key) error
	Read() wgcfg.Report
	Nudge()
	Probe()
	Handshake(wgtypes.Key) error // send an initiation now (runos vpn doctor's probe)
	Close() error
	// NetworkChanged rebinds the sockets, re-handshakes every peer and
	// re-opens each cluster's relay decision (a new network, a wake).
	NetworkChanged() error
	// SetUplinkMTU clamps TCP over the tunnel to what fits the uplink.
	SetUplinkMTU(mtu int)
}

// retryApply is when a failed Apply or DNS Set is tried again, with no new plan.
const retryApply = time.Second

// daemon holds the inputs of the state derivation and applies what it
// derives. Every change goes through update: set an input, then update
// derives the plan and the status from all inputs and applies and
// publishes what changed.
type daemon struct {
	log        *slog.Logger
	clock      func() time.Time
	dir        store.Dir
	public     wgtypes.Key // the device's public key: the only key that leaves the machine (mu: replaced after a revocation)
	hostname   string
	goos       string
	eng        engine
	dns        dnsplit.Configurator // nil: DNS mode off
	newControl func(apiURL, token string) (control, error)
	allowHTTP  bool          // sessions of an http:// control are accepted (--insecure-http)
	mapWait    time.Duration // how long each map long-poll may be held
	longPoll   bool          // follow the map by long-polls, never a stream (--long-poll)
	backoffMin time.Duration
	backoffMax time.Duration

	ctx         context.Context // the daemon's lifetime
	wakeRead    chan struct{}
	wakePending chan struct{} // something was added to the pending changes (pending.go)
	sendingMu   sync.Mutex    // held while a pending change is sent to control
	relay       *relayTickets // asks control for relay tickets with the session; nil in tests without one

	mu       sync.Mutex
	in       state.Inputs
	tunnel   appliedState[wgcfg.Config]
	dnsState appliedState[[]dnsplit.Route]
	status   localapi.Status
	statusJS []byte // status without Seq, to tell a change
	watchers map[*watcher]struct{}
	sess     *syncSession // the sync of the current session; nil when none
	refusals []string     // what the trust refused of the last map, as logged
	counts   *counters    // the daemon's own metrics; nil: not counted (tests)
}

// appliedState remembers what was last applied, and when a failed attempt
// may be retried.
type appliedState[T any] struct {
	ok      bool
	value   T
	err     string
	retryAt time.Time
}

// change runs f on the inputs, then updates and wakes the device reader so
// it picks the right read interval at once.
func (d *daemon) change(f func(in *state.Inputs)) {
	d.mu.Lock()
	f(&d.in)
	d.updateLocked()
	d.mu.Unlock()
	d.kickRead()
}

func (d *daemon) kickRead() {
	select {
	case d.wakeRead <- struct{}{}:
	default:
	}
}

// updateLocked derives the plan and applies what changed, reads the device
// back, derives the status and publishes it if it changed. mu held.
func (d *daemon) updateLocked() {
	now := d.clock()
	d.in.Now = now
	plan := state.Want(&d.in)

	if d.tunnel.ok && !onDevice(plan.Tunnel, d.in.Device) && !now.Before(d.tunnel.retryAt) {
		// Someone removed a peer by hand (wg set … remove): put it back.
		d.tunnel.ok, d.tunnel.retryAt = false, now.Add(retryApply)
	}
	if same := plan.Tunnel.Equal(d.tunnel.value); (!d.tunnel.ok || !same) && due(d.tunnel.retryAt, same, now) {
		if err := d.eng.Apply(plan.Tunnel); err != nil {
			d.log.Warn("configure the tunnel", "err", err)
			d.tunnel = appliedState[wgcfg.Config]{value: plan.Tunnel, err: err.Error(), retryAt: now.Add(retryApply)}
		} else {
			d.tunnel = appliedState[wgcfg.Config]{ok: true, value: plan.Tunnel, retryAt: d.tunnel.retryAt}
		}
		d.readLocked()
	}
	if d.dns != nil {
		same := slices.EqualFunc(plan.DNS, d.dnsState.value, sameRoute)
		if (!d.dnsState.ok || !same) && due(d.dnsState.retryAt, same, now) {
			if err := d.dns.Set(d.ctx, plan.DNS); err != nil {
				d.log.Warn("configure split DNS", "err", err)
				d.dnsState = appliedState[[]dnsplit.Route]{value: plan.DNS, err: err.Error(), retryAt: now.Add(retryApply)}
			} else {
				d.dnsState = appliedState[[]dnsplit.Route]{ok: true, value: plan.DNS}
			}
		}
		d.in.DNS = d.dns.Status()
		if d.in.DNS.Error == "" {
			d.in.DNS.Error = d.dnsState.err
		}
	}
	if !d.in.SignedIn() && d.sess != nil {
		d.stopSyncLocked() // lapsed on the local clock: stop talking to control with it
	}
	if d.relay != nil {
		var c relayCreds
		if d.in.SignedIn() {
			c = relayCreds{apiURL: d.in.Prefs.APIURL, token: d.in.Prefs.AccessToken, deviceID: d.in.Prefs.DeviceID}
		}
		d.relay.set(c)
	}
	d.publishLocked(state.Derive(&d.in))
}

// due says whether to try applying now: at once for a new plan; the same
// plan that failed only once its retry time has come.
func due(retryAt time.Time, same bool, now time.Time) bool {
	return !same || !now.Before(retryAt)
}

// onDevice reports whether every peer of cfg is on the device (a failed
// read says nothing, so it counts as present).
func onDevice(cfg wgcfg.Config, r wgcfg.Report) bool {
	if r.Err != "" {
		return true
	}
	for _, p := range cfg.Peers {
		if _, ok := r.Peer(p.PublicKey); !ok {
			return false
		}
	}
	return true
}

func sameRoute(a, b dnsplit.Route) bool {
	return a.CID == b.CID && a.Server == b.Server && slices.Equal(a.Domains, b.Domains)
}

// readLocked reads the device into the inputs. mu held.
func (d *daemon) readLocked() {
	r := d.eng.Read()
	if d.counts != nil {
		d.counts.observeDevice(r, d.tunnel.value)
	}
	if d.tunnel.err != "" {
		r.Err = d.tunnel.err
	}
	d.in.Device = r
}

// publishLocked makes st the current status if it differs from the last
// one, and offers it to every watcher. mu held.
func (d *daemon) publishLocked(st localapi.Status) {
	st.Seq = 0
	js, _ := json.Marshal(st)
	if d.statusJS != nil && string(js) == string(d.statusJS) {
		return
	}
	d.statusJS = js
	if d.counts != nil {
		d.counts.observeStatus(d.status, st)
	}
	st.Seq = d.status.Seq + 1
	d.status = st
	for w := range d.watchers {
		w.offer(st)
	}
}

// Status returns the current status.
func (d *daemon) Status() localapi.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}

// readLoop reads the device on state.ReadEvery's schedule (local reads of
// the device, not network polls: every second while all is up, faster while
// a handshake is awaited), nudges and probes the peers that need it, and
// wakes for the next instant at which time alone changes the status (a
// handshake going stale, a server falling silent, the session lapsing).
func (d *daemon) readLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wakeRead:
		}
		d.mu.Lock()
		d.in.Now = d.clock()
		d.eng.Nudge()
		d.readLocked()
		d.updateLocked()
		d.eng.Probe()
		wait := state.ReadEvery(&d.in)
		if next := state.NextChange(&d.in); !next.IsZero() {
			wait = min(wait, max(next.Sub(d.in.Now), time.Millisecond))
		}
		d.mu.Unlock()
		t.Reset(wait)
	}
}
