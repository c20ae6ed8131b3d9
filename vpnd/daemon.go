package vpnd

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
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
	// Traffic is each peer's received plus sent bytes: the memory watch's
	// measure of traffic, without Read's observation of the peers.
	Traffic() (map[wgtypes.Key]uint64, error)
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

// retryApply is when a failed Apply, DNS Set or prefs write is tried again, with no new plan.
const retryApply = time.Second

// daemon holds the inputs of the state derivation and applies what it
// derives. Every change goes through update: set an input, then update
// derives the plan and the status from all inputs under mu, publishes the
// status and hands the plan to the applier (apply.go), which acts outside
// mu.
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
	removeKept func(dir string) error  // forgets the kept map; nil: cache.Remove (tests inject a failing one)
	writePrefs func(store.Prefs) error // the applier's write of prefs.json; nil: dir.SavePrefs (tests hold it)

	ctx         context.Context // the daemon's lifetime
	wakeRead    chan struct{}
	wakePending chan struct{} // something was added to the pending changes (pending.go)
	sendingMu   sync.Mutex    // held while a pending change is sent to control
	relay       *relayTickets // asks control for relay tickets with the session; nil in tests without one
	apply       *applier      // the plans on their way to the applier; nil: nothing applies (tests of the derivation)
	snapshot    atomic.Pointer[localapi.Status]

	mu         sync.Mutex
	in         state.Inputs
	applied    applied // what the applier did last
	gen        uint64  // the last plan handed to the applier
	offered    *job    // that plan
	prefsDirty bool    // prefs changed since the last plan
	// joining are the clusters whose join control is answering (connectAs):
	// wanted in the prefs on disk already, not yet in the plan.
	joining    map[string]int
	keptAt     time.Time // ReceivedAt of the map last handed over to be kept; zero: none
	keptVer    uint64    // and its version
	keptOnDisk bool      // a kept map may be on disk (to remove once signed out)
	repairAt   time.Time
	status     localapi.Status
	statusJS   []byte // status without Seq, to tell a change
	watchers   map[*watcher]struct{}
	sess       *syncSession // the sync of the current session; nil when none
	refusals   []string     // what the trust refused of the last map, as logged
	counts     *counters    // the daemon's own metrics; nil: not counted (tests)
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

func (d *daemon) kickRead() { kick(d.wakeRead) }

// kick wakes the goroutine that waits on c, a channel of capacity 1: a
// wake already pending covers this one, so kick never blocks.
func kick(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// updateLocked derives the plan and the status; it publishes the status if
// it changed and hands the plan to the applier if it changed (or the
// prefs did, or the device lost a peer). It does no I/O. mu held.
func (d *daemon) updateLocked() {
	now := d.clock()
	d.in.Now = now
	plan := state.Want(&d.in)
	repair := false
	if d.applied.tunnelOK && plan.Tunnel.Equal(d.applied.tunnel) && !onDevice(plan.Tunnel, d.in.Device) && !now.Before(d.repairAt) {
		// Someone removed a peer by hand (wg set … remove): put it back
		// (at most once a retryApply, should the device keep refusing).
		repair, d.repairAt = true, now.Add(retryApply)
	}
	if o := d.offered; o == nil || repair || d.prefsDirty || o.dns != d.dns || !samePlan(o.plan, plan) || d.keptChanges() {
		d.gen++
		j := &job{gen: d.gen, plan: plan, repair: repair, dns: d.dns}
		if d.prefsDirty {
			j.prefs = d.prefsOnDiskLocked()
			d.prefsDirty = false
		}
		j.kept, j.dropKept = d.keptLocked()
		d.offered = &job{gen: j.gen, plan: plan, dns: d.dns}
		if d.apply != nil {
			d.apply.offer(j)
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

// prefsOnDiskLocked is the prefs as written: the inputs' with the
// clusters being joined among the wanted ones. mu held.
func (d *daemon) prefsOnDiskLocked() *store.Prefs {
	p := clonePrefs(d.in.Prefs)
	for cid := range d.joining {
		if !slices.Contains(p.Wanted, cid) {
			p.Wanted = append(p.Wanted, cid)
		}
	}
	slices.Sort(p.Wanted)
	return p
}

func samePlan(a, b state.Plan) bool {
	return a.Tunnel.Equal(b.Tunnel) && slices.EqualFunc(a.DNS, b.DNS, sameRoute)
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
	d.snapshot.Store(&st)
	for w := range d.watchers {
		w.offer(st)
	}
}

// Status returns the current status: the last one published, which never
// waits for the lock or for anything being applied.
func (d *daemon) Status() localapi.Status {
	if st := d.snapshot.Load(); st != nil {
		return *st
	}
	return localapi.Status{}
}

// settle waits until the applier has acted on every plan made so far
// (outside mu: status never waits for it), and returns the outcome of the
// last prefs write.
func (d *daemon) settle(ctx context.Context) error {
	d.mu.Lock()
	gen := d.gen
	d.mu.Unlock()
	if d.apply == nil {
		return nil
	}
	return d.apply.wait(ctx, gen)
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
		d.eng.Nudge()
		d.readDevice() // returns with mu held
		d.updateLocked()
		wait := state.ReadEvery(&d.in)
		if next := state.NextChange(&d.in); !next.IsZero() {
			wait = min(wait, max(next.Sub(d.in.Now), time.Millisecond))
		}
		d.mu.Unlock()
		d.eng.Probe()
		t.Reset(wait)
	}
}
