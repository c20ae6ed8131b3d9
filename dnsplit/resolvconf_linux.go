package dnsplit

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxReapply is how many foreign rewrites of resolv.conf are undone
	// within reapplyWindow before split DNS stops fighting the other
	// program (NetworkManager, dhclient, resolvconf) and says so.
	maxReapply    = 5
	reapplyWindow = 10 * time.Minute
	// recheckEvery backs up inotify (which can miss writes made through
	// another mount) with a cheap comparison.
	recheckEvery = 30 * time.Second
	// emptyRecheck is how soon an empty resolv.conf is looked at again.
	emptyRecheck = time.Second
)

// resolvConfMode points resolv.conf at the built-in forwarder while any
// cluster is connected.
type resolvConfMode struct {
	opt    Options
	log    *slog.Logger
	j      *journal
	reason string
	ex     exchanger // nil: the network

	mu       sync.Mutex
	routes   []Route
	fwd      *forwarder
	rec      change // recorded original and what was written, while active
	inPlace  bool
	watch    *fileWatch
	ticker   *time.Ticker
	stopTick chan struct{}
	rewrites []time.Time // foreign rewrites undone, within reapplyWindow
	gaveUp   bool
	err      string
	checks   atomic.Int64 // how many times check ran (tests wait on it, not on time)
	counts   queryCounts
}

func newResolvConfMode(opt Options, j *journal, reason string) *resolvConfMode {
	return &resolvConfMode{opt: opt, log: opt.Logger, j: j, reason: reason}
}

func (m *resolvConfMode) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range m.rewrites {
		if m.opt.Now().Sub(t) < reapplyWindow {
			n++
		}
	}
	if m.gaveUp {
		n++ // the one it no longer undid
	}
	return Status{Mode: ModeResolvConf, Reason: m.reason, Error: m.err, Rewrites: n}
}

// Queries counts what the forwarder handled.
func (m *resolvConfMode) Queries() Queries { return m.counts.queries() }

func (m *resolvConfMode) Set(_ context.Context, routes []Route) error {
	routes, err := normalizeRoutes(routes)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(routes) == 0 {
		return m.deactivate()
	}
	m.routes = routes
	if m.fwd != nil {
		m.fwd.setTable(m.table(m.rec.Original))
		return nil
	}
	if err := m.activate(); err != nil {
		m.err = err.Error()
		return err
	}
	m.err = ""
	return nil
}

func (m *resolvConfMode) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deactivate()
}

func (m *resolvConfMode) table(orig []byte) *forwardTable {
	rc := parseResolvConf(orig)
	return newForwardTable(m.routes, rc.upstreams(), min(rc.timeout, defaultUpstreamTimeout), m.opt.ListenAddr)
}

// activate records the original, starts the forwarder, then points the file
// at it. Any failure undoes the steps before it: nothing half-configured.
func (m *resolvConfMode) activate() error {
	path := m.opt.ResolvConf
	rec, err := m.original(path)
	if err != nil {
		return fmt.Errorf("dns: read %s: %w", path, err)
	}
	if isOurResolvConf(rec.Original) {
		// Left by a run whose record is gone: what it pointed at before is
		// unknown, so refuse rather than forward to ourselves.
		return fmt.Errorf("dns: %s already points at a runos forwarder with nothing recorded to restore; "+
			"put the right nameservers back in it and reconnect", path)
	}
	rec.Written = renderResolvConf(rec.Original, m.opt.ListenAddr.Addr(), m.j.path)
	if err := m.j.record(rec); err != nil {
		return err
	}
	fwd := newForwarder(m.log, m.opt.Now, m.ex, m.table(rec.Original))
	fwd.counts = &m.counts
	if err := fwd.listen(m.opt.ListenAddr); err != nil {
		_ = m.j.forget(rec)
		return fmt.Errorf("dns: %w", err)
	}
	inPlace, err := writeResolvConf(path, rec.Written, rec.Perm)
	if err != nil {
		// A write that failed part way may have changed the file: the
		// record goes only once the original is back for sure.
		if left, rerr := restoreResolvConf(rec); rerr == nil && !left {
			_ = m.j.forget(rec)
		}
		fwd.close()
		return fmt.Errorf("dns: point %s at the forwarder: %w", path, err)
	}
	m.fwd, m.rec, m.inPlace = fwd, rec, inPlace
	m.rewrites, m.gaveUp = nil, false
	m.startWatching()
	m.log.Info("dns: resolv.conf points at the forwarder", "path", path, "listen", m.opt.ListenAddr, "inPlace", inPlace,
		"upstreams", fmt.Sprint(parseResolvConf(rec.Original).upstreams()))
	return nil
}

// original is what to record as path's original: what is there now, unless
// an earlier change's record is still kept and the file is still ours (or
// half-written by us), as when undoing it failed: then that record's
// original, never a file of our own.
func (m *resolvConfMode) original(path string) (change, error) {
	cs, err := m.j.load()
	if err != nil {
		return change{}, err
	}
	for _, c := range cs {
		if c.Kind != kindResolvConf || c.Path != path {
			continue
		}
		if st, err := judgeResolvConf(c); err == nil && st == resolvOurs {
			m.log.Info("dns: resolv.conf is still ours from an earlier change; keeping its recorded original", "path", path)
			c.Written = nil
			return c, nil
		}
	}
	return snapshotResolvConf(path)
}

func (m *resolvConfMode) startWatching() {
	w, err := watchFile(m.opt.ResolvConf, m.check)
	if err != nil {
		m.log.Warn("dns: cannot watch resolv.conf; checking it every "+recheckEvery.String()+" only", "err", err)
	}
	m.watch = w
	m.ticker = time.NewTicker(recheckEvery)
	m.stopTick = make(chan struct{})
	t, stop := m.ticker, m.stopTick
	go func() {
		for {
			select {
			case <-t.C:
				m.check()
			case <-stop:
				return
			}
		}
	}()
}

func (m *resolvConfMode) stopWatching() {
	if m.watch != nil {
		m.watch.Close()
		m.watch = nil
	}
	if m.ticker != nil {
		m.ticker.Stop()
		close(m.stopTick)
		m.ticker = nil
	}
}

// deactivate restores the original and stops the forwarder, in that order,
// so resolv.conf never points at a forwarder that is gone.
func (m *resolvConfMode) deactivate() error {
	m.routes = nil
	m.err = ""
	if m.fwd == nil {
		return nil
	}
	m.stopWatching()
	left, err := restoreResolvConf(m.rec)
	if err != nil {
		m.err = fmt.Sprintf("restore %s: %v", m.rec.Path, err)
		return fmt.Errorf("dns: restore %s: %w (still recorded; `runos vpnd --cleanup` retries)", m.rec.Path, err)
	}
	if left {
		// Theirs stays; the record of ours too, until a new change
		// replaces it (Cleanup says so at each start meanwhile).
		m.log.Warn("dns: another program replaced resolv.conf; leaving its version", "path", m.rec.Path)
	} else {
		m.log.Info("dns: resolv.conf restored", "path", m.rec.Path)
		if err := m.j.forget(m.rec); err != nil {
			m.log.Warn("dns: could not drop the resolv.conf record", "err", err)
		}
	}
	m.fwd.close()
	m.fwd = nil
	return nil
}

// check notices a foreign rewrite of resolv.conf and re-applies ours, taking
// the other program's nameservers as the new originals (a DHCP renewal is
// news worth keeping); after maxReapply within reapplyWindow it stops
// fighting and reports it in Status.
func (m *resolvConfMode) check() {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.checks.Add(1)
	if m.fwd == nil || m.gaveUp {
		return
	}
	path := m.rec.Path
	cur, err := os.ReadFile(path)
	if err == nil && bytes.Equal(cur, m.rec.Written) {
		return
	}
	if err == nil && len(cur) == 0 {
		// Another program in the middle of a truncate-then-write: its
		// content is not there yet, and an empty file must never become
		// the "original". Look again in a moment (its write is an event too).
		time.AfterFunc(emptyRecheck, m.check)
		return
	}
	now := m.opt.Now()
	kept := m.rewrites[:0]
	for _, t := range m.rewrites {
		if now.Sub(t) < reapplyWindow {
			kept = append(kept, t)
		}
	}
	m.rewrites = kept
	if len(m.rewrites) >= maxReapply {
		m.gaveUp = true
		m.err = fmt.Sprintf("another program keeps rewriting %s (%d times within %.0f minutes); split DNS stopped re-applying, "+
			"so cluster names may not resolve privately: find what manages the file, then reconnect",
			path, len(m.rewrites)+1, reapplyWindow.Minutes())
		m.log.Warn("dns: "+m.err, "path", path)
		return
	}
	m.rewrites = append(m.rewrites, now)

	rec := m.rec
	if err == nil && !halfOurs(cur, rec) {
		snap, serr := snapshotResolvConf(path)
		if serr == nil {
			rec.Original, rec.Perm, rec.Symlink, rec.Missing = snap.Original, snap.Perm, snap.Symlink, snap.Missing
		}
	}
	rec.Written = renderResolvConf(rec.Original, m.opt.ListenAddr.Addr(), m.j.path)
	if err := m.j.record(rec); err != nil {
		m.err = err.Error()
		return
	}
	m.rec = rec
	m.fwd.setTable(m.table(rec.Original))
	inPlace, werr := writeResolvConf(path, rec.Written, rec.Perm)
	if werr != nil {
		m.err = fmt.Sprintf("re-apply %s: %v", path, werr)
		m.log.Warn("dns: " + m.err)
		return
	}
	m.inPlace = inPlace
	m.log.Info("dns: another program rewrote resolv.conf; re-applied", "path", path,
		"count", len(m.rewrites), "max", maxReapply, "upstreams", fmt.Sprint(parseResolvConf(rec.Original).upstreams()))
}
