package vpnd

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/vpnd/cache"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/store"
	"github.com/runos/vpn/vpnd/wgcfg"
)

// The daemon decides under its lock and acts outside it. updateLocked
// derives the plan (vpnd/state.Want) and hands it, with the prefs to write,
// to the applier: one goroutine that configures the tunnel (peers,
// addresses, routes), split DNS (D-Bus to systemd-resolved, or
// resolv.conf) and writes prefs.json, in the order the plans were made.
// Plans wait in one slot: a plan not yet taken is replaced by a newer one
// (only the latest matters, and the prefs it carries are the whole file),
// so a slow resolver builds no backlog and never holds the lock. What
// applying did (errors, the device read back, DNS's own status) comes back
// into the inputs under the lock, so status tells the truth about it.

// job is one plan for the applier.
type job struct {
	gen    uint64
	plan   state.Plan
	repair bool                 // the device lost a peer of this plan (wg set … remove): apply it again
	prefs  *store.Prefs         // to write; nil: unchanged since the last job
	dns    dnsplit.Configurator // the configurator of this plan (nil: DNS off)
	// kept is the map to keep on disk once applied (vpnd/cache); dropKept
	// removes the kept one (signed out, revoked). Neither: no change.
	kept     *cache.Entry
	dropKept bool
}

// applier is the slot between the daemon's lock and the applying goroutine.
type applier struct {
	mu       sync.Mutex
	next     *job
	doneGen  uint64        // the last job applied
	prefsErr error         // the last prefs write's outcome
	progress chan struct{} // closed when doneGen moves (then replaced)
	wake     chan struct{} // cap 1: "next is set"
	busy     atomic.Bool   // applying right now (DNS's status would wait for it)
}

func newApplier() *applier {
	return &applier{progress: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// offer puts j in the slot, replacing a job not yet taken (whose prefs it
// keeps when j has none: they were not written yet). It never blocks.
func (a *applier) offer(j *job) {
	a.mu.Lock()
	if old := a.next; old != nil {
		if j.prefs == nil {
			j.prefs = old.prefs
		}
		if j.kept == nil && !j.dropKept {
			j.kept, j.dropKept = old.kept, old.dropKept
		}
		j.repair = j.repair || old.repair
	}
	a.next = j
	a.mu.Unlock()
	kick(a.wake)
}

func (a *applier) take() *job {
	a.mu.Lock()
	defer a.mu.Unlock()
	j := a.next
	a.next = nil
	return j
}

// finished records that the job gen was applied (or superseded by it),
// with the outcome of its prefs write when it had one.
func (a *applier) finished(gen uint64, wrote bool, prefsErr error) {
	a.mu.Lock()
	a.doneGen = max(a.doneGen, gen)
	if wrote {
		a.prefsErr = prefsErr
	}
	close(a.progress)
	a.progress = make(chan struct{})
	a.mu.Unlock()
}

// wait returns once the job gen (or one that superseded it) is applied,
// with the outcome of the last prefs write.
func (a *applier) wait(ctx context.Context, gen uint64) error {
	for {
		a.mu.Lock()
		done, err, ch := a.doneGen, a.prefsErr, a.progress
		a.mu.Unlock()
		if done >= gen {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// applied is what the applier did last, kept under the daemon's lock.
type applied struct {
	tunnel    wgcfg.Config // the tunnel's configuration as last applied successfully
	tunnelOK  bool         // the last Apply worked
	tunnelErr string       // why the last Apply failed ("" when it worked)
	dnsErr    string       // why the last DNS Set failed
	deviceGen uint64       // moves at the start and the end of every job that applies the tunnel
	applying  bool         // such a job is under way: a read now would show its tunnel before its DNS
}

// applyState is the applier goroutine's own memory of what it applied.
type applyState struct {
	tunnel   appliedState[wgcfg.Config]
	dns      appliedState[[]dnsplit.Route]
	dnsCfg   dnsplit.Configurator
	prefs    *store.Prefs // a write that failed, to try again
	written  *store.Prefs // the last prefs written: the same again is not rewritten
	keep     *keepOp      // a kept-map write or removal not done yet (failed: tried again)
	lastPlan *job
}

// keepOp is what becomes of the kept map: entry written, or drop removes it.
type keepOp struct {
	entry *cache.Entry
	drop  bool
}

// appliedState remembers what was last applied and whether it worked.
type appliedState[T any] struct {
	ok    bool
	value T
	err   string
}

// applyLoop applies the daemon's plans until ctx ends; a failed step is
// tried again after retryApply with the latest plan. At the end, prefs not
// yet written are written (tunnel and DNS are the teardown's to undo).
func (d *daemon) applyLoop(ctx context.Context) {
	var s applyState
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			if j := d.apply.take(); j != nil {
				if j.prefs != nil {
					s.prefs = j.prefs
				}
				if j.dropKept {
					s.keep = &keepOp{drop: true}
				}
			}
			if s.keep != nil && s.keep.drop {
				d.keep(&s) // a last try: the next start must not find it
			}
			if s.prefs != nil {
				d.savePrefs(s.prefs)
			}
			return
		case <-d.apply.wake:
		case <-retry.C:
		}
		j := d.apply.take()
		if j == nil {
			j = s.lastPlan // a retry: the latest plan again
		}
		if j == nil {
			continue
		}
		if j.prefs != nil {
			s.prefs = j.prefs
		}
		s.lastPlan = &job{gen: j.gen, plan: j.plan, dns: j.dns}
		if d.applyOne(&s, j) {
			retry.Reset(retryApply)
		}
	}
}

// applyOne applies j: prefs and the tunnel at once, then DNS (it points
// into the tunnel); then it reads the device back and hands the outcome to the
// state. It reports whether something failed (to be tried again).
func (d *daemon) applyOne(s *applyState, j *job) (failed bool) {
	d.apply.busy.Store(true)
	defer d.apply.busy.Store(false)
	if j.kept != nil || j.dropKept {
		s.keep = &keepOp{entry: j.kept, drop: j.dropKept} // replaces one not done yet
	}
	if s.keep != nil && s.keep.drop {
		// Before the signed-out prefs: a crash between the two must never
		// leave a kept map that a start with the old prefs would bring back.
		d.keep(s)
	}
	// What was decided is on disk before it acts on the system: a crash
	// in the middle of DNS must not forget a wanted cluster. The prefs'
	// write (an fsync of the file and of its directory, 2–3 ms) runs
	// beside the tunnel's configuration, not before it: a connect's first
	// handshake waited for it. The tunnel (wireguard-go's peers, the
	// interface's addresses and routes) ends with this process, so a
	// crash before the prefs are on disk leaves nothing of it behind; DNS
	// outlives a crash, and waits for them.
	var prefsErr error
	wrote := s.prefs != nil
	var saved chan struct{}
	if wrote && s.written != nil && reflect.DeepEqual(s.prefs, s.written) {
		s.prefs = nil // on disk already (connectAs wrote them before its join)
	} else if wrote {
		saved = make(chan struct{})
		go func(p *store.Prefs) {
			defer close(saved)
			prefsErr = d.savePrefs(p)
		}(s.prefs)
	}
	touched := d.applyTunnel(s, j)
	if saved != nil {
		<-saved
		if prefsErr == nil {
			s.written, s.prefs = s.prefs, nil
		}
	}
	dnsStatus := d.applyDNS(s, j)
	d.keep(s)
	var r wgcfg.Report
	if touched {
		r = d.eng.Read()
	}
	d.mu.Lock()
	a := &d.applied
	if touched {
		a.deviceGen++
		a.applying = false
		if s.tunnel.ok {
			a.tunnel = s.tunnel.value
		}
		a.tunnelOK, a.tunnelErr = s.tunnel.ok, s.tunnel.err
		d.setDeviceLocked(r, s.tunnel.value)
	}
	a.dnsErr = s.dns.err
	if dnsStatus != nil {
		d.setDNSLocked(*dnsStatus)
	}
	if wrote {
		d.in.SaveErr = ""
		if prefsErr != nil {
			d.in.SaveErr = prefsErr.Error()
		}
	}
	d.updateLocked()
	d.mu.Unlock()
	d.apply.finished(j.gen, wrote, prefsErr)
	d.kickRead()
	return s.tunnel.err != "" || s.dns.err != "" || s.prefs != nil || s.keep != nil
}

// applyTunnel configures the tunnel when the plan's differs from what it
// holds (or the last try failed, or a peer went missing); it reports
// whether it did.
func (d *daemon) applyTunnel(s *applyState, j *job) bool {
	if s.tunnel.ok && !j.repair && j.plan.Tunnel.Equal(s.tunnel.value) {
		return false
	}
	d.mu.Lock()
	// Reads taken from here to the end of the job are dropped: they would
	// show a peer up before its cluster's names resolve.
	d.applied.deviceGen++
	d.applied.applying = true
	d.mu.Unlock()
	if err := d.eng.Apply(j.plan.Tunnel); err != nil {
		d.log.Warn("configure the tunnel", "err", err)
		s.tunnel = appliedState[wgcfg.Config]{value: j.plan.Tunnel, err: err.Error()}
	} else {
		s.tunnel = appliedState[wgcfg.Config]{ok: true, value: j.plan.Tunnel}
	}
	return true
}

// applyDNS sets the plan's DNS routes when they differ from what the
// configurator holds (or the last try failed), and returns the
// configurator's status after it (nil: DNS off).
func (d *daemon) applyDNS(s *applyState, j *job) *dnsplit.Status {
	if j.dns != s.dnsCfg {
		s.dns, s.dnsCfg = appliedState[[]dnsplit.Route]{}, j.dns
	}
	if j.dns == nil {
		return nil
	}
	if !s.dns.ok || !slices.EqualFunc(j.plan.DNS, s.dns.value, sameRoute) {
		if err := j.dns.Set(d.ctx, j.plan.DNS); err != nil {
			d.log.Warn("configure split DNS", "err", err)
			s.dns = appliedState[[]dnsplit.Route]{value: j.plan.DNS, err: err.Error()}
		} else {
			s.dns = appliedState[[]dnsplit.Route]{ok: true, value: j.plan.DNS}
		}
	}
	st := j.dns.Status()
	return &st
}

// keep writes or removes the kept map as s.keep says (a write after the
// tunnel and DNS: it is the last map applied). A failure is logged and
// s.keep stays, so the applier tries again after retryApply (or with the
// next plan, whose own keepOp replaces it): a removal at sign-out that
// failed once is never forgotten.
func (d *daemon) keep(s *applyState) {
	if s.keep == nil {
		return
	}
	var err error
	if s.keep.drop {
		rm := d.removeKept
		if rm == nil {
			rm = cache.Remove
		}
		err = rm(d.dir.Path)
	} else {
		err = cache.Save(d.dir.Path, *s.keep.entry)
	}
	if err != nil {
		d.log.Warn("keep the last configuration for restarts without control", "remove", s.keep.drop, "err", err)
		return
	}
	s.keep = nil
}

// savePrefs writes prefs.json (outside the lock: the applier's step).
func (d *daemon) savePrefs(p *store.Prefs) error {
	write := d.writePrefs
	if write == nil {
		write = d.dir.SavePrefs
	}
	if err := write(*p); err != nil {
		d.log.Error("save prefs", "err", err)
		return fmt.Errorf("save the session and wanted clusters: %w", err)
	}
	return nil
}

// setDeviceLocked makes r, read from the device configured with cfg, the
// inputs' device, with the last Apply's failure as its error. mu held.
func (d *daemon) setDeviceLocked(r wgcfg.Report, cfg wgcfg.Config) {
	if d.counts != nil {
		d.counts.observeDevice(r, cfg)
	}
	if d.applied.tunnelErr != "" {
		r.Err = d.applied.tunnelErr
	}
	d.in.Device = r
}

// setDNSLocked makes s the inputs' DNS status, with the last Set's failure
// as its error when it has none of its own. mu held.
func (d *daemon) setDNSLocked(s dnsplit.Status) {
	if s.Error == "" {
		s.Error = d.applied.dnsErr
	}
	d.in.DNS = s
}

// readDevice reads the device (and DNS's status when the applier is not
// in the middle of a change) outside the lock and takes it into the
// inputs, unless a job applied the tunnel meanwhile (then the applier's
// own read, at the job's end, is the one to take). It returns with mu held.
func (d *daemon) readDevice() {
	d.mu.Lock()
	gen, applying, dns, cfg := d.applied.deviceGen, d.applied.applying, d.dns, d.applied.tunnel
	d.mu.Unlock()
	r := d.eng.Read()
	var ds *dnsplit.Status
	if dns != nil && !d.apply.busy.Load() {
		st := dns.Status()
		ds = &st
	}
	d.mu.Lock()
	if !applying && d.applied.deviceGen == gen {
		d.setDeviceLocked(r, cfg)
	}
	if ds != nil && dns == d.dns {
		d.setDNSLocked(*ds)
	}
}

// clonePrefs copies p so that the applier's write never shares a slice
// with the inputs (slices.Delete and append change them in place).
func clonePrefs(p store.Prefs) *store.Prefs {
	p.Wanted = slices.Clone(p.Wanted)
	p.Pending = slices.Clone(p.Pending)
	for i := range p.Pending {
		p.Pending[i].Clusters = slices.Clone(p.Pending[i].Clusters)
	}
	return &p
}
