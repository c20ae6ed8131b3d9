package dnsplit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runos/vpn/internal/fault"
)

// resolvedMode gives the tunnel's link its own DNS servers and routing-only
// (~) domains in systemd-resolved, so only cluster names go through it.
type resolvedMode struct {
	opt    Options
	log    *slog.Logger
	j      *journal
	r      Resolved
	reason string

	mu     sync.Mutex
	routes []Route
	rec    *change // the link we configured, while any
	err    string
	closed bool
	// split serves the link while two or more clusters share it
	// (resolved_splitter.go); splitPort is 53 but in tests.
	split     *splitter
	splitPort uint16
	splitEx   exchanger   // nil: the network
	counts    queryCounts // the splitter's, across its restarts
}

// busTimeout bounds one D-Bus call: resolved answers in microseconds, and a
// hung bus must not hang a connect.
const busTimeout = 5 * time.Second

func newResolvedMode(opt Options, j *journal, r Resolved, reason string) *resolvedMode {
	m := &resolvedMode{opt: opt, log: opt.Logger, j: j, r: r, reason: reason, splitPort: 53}
	if ch := r.Restarted(); ch != nil {
		go m.reapplyOnRestart(ch)
	}
	return m
}

// reapplyOnRestart puts the tunnel's settings back after resolved restarts
// (an upgrade, a crash): it forgets every link's settings when it goes, and
// cluster names would silently stop resolving.
func (m *resolvedMode) reapplyOnRestart(restarted <-chan struct{}) {
	for range restarted {
		m.reapply("systemd-resolved restarted")
	}
}

// reapply sets the tunnel link's DNS again, from scratch.
func (m *resolvedMode) reapply(why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec != nil && len(m.routes) > 0 && !m.closed {
		m.log.Info("dns: "+why+"; setting the tunnel's DNS again", "interface", m.opt.Interface)
		routes := m.routes
		m.routes = nil // so set logs the routes again
		err := m.set(context.Background(), routes)
		m.err = ""
		if err != nil {
			m.err = err.Error()
			m.log.Warn("dns: re-apply after "+why, "err", err)
		}
	}
}

func (m *resolvedMode) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Status{Mode: ModeResolved, Reason: m.reason, Error: m.err}
}

// Queries counts what the splitter handled (only it serves queries here).
func (m *resolvedMode) Queries() Queries { return m.counts.queries() }

// linkConfig is what the tunnel's link gets: every cluster's server and
// every cluster's domain as routing-only.
func linkConfig(routes []Route) (servers []netip.Addr, domains []string) {
	for _, r := range routes {
		if r.Server.IsValid() && !slices.Contains(servers, r.Server) {
			servers = append(servers, r.Server)
		}
		for _, d := range r.Domains {
			d = strings.ToLower(strings.Trim(d, "."))
			if d != "" && !slices.Contains(domains, d) {
				domains = append(domains, d)
			}
		}
	}
	return servers, domains
}

func (m *resolvedMode) Set(ctx context.Context, routes []Route) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("dns: systemd-resolved configurator already closed")
	}
	err := m.set(ctx, routes)
	m.err = ""
	if err != nil {
		m.err = err.Error()
	}
	return err
}

func (m *resolvedMode) set(ctx context.Context, routes []Route) error {
	routes, err := normalizeRoutes(routes)
	if err != nil {
		return err
	}
	servers, domains := linkConfig(routes)
	if len(servers) == 0 || len(domains) == 0 {
		m.routes = nil
		return m.revert(ctx)
	}
	idx, err := m.opt.InterfaceIndex(m.opt.Interface)
	if err != nil {
		return fmt.Errorf("dns: tunnel interface %s: %w", m.opt.Interface, err)
	}
	if m.rec != nil && m.rec.Index == idx && slices.EqualFunc(m.routes, routes, routeEqual) && !m.splitMoved() {
		return nil // already so: no need to flush resolved's cache again
	}
	if m.rec != nil && m.rec.Index != idx {
		// The tunnel was recreated under a new index: the old link is gone
		// or is someone else's now; only forget it.
		_ = m.j.forget(*m.rec)
		m.rec = nil
	}
	rec := change{Kind: kindResolvedLink, Interface: m.opt.Interface, Index: idx}
	if err := m.j.record(rec); err != nil {
		return err
	}
	m.rec = &rec
	ctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	fail := func(step string, err error) error {
		_ = m.revert(ctx)
		return fmt.Errorf("dns: systemd-resolved %s on %s (link %d): %w", step, m.opt.Interface, idx, err)
	}
	linkServers := m.linkServers(routes, servers)
	if err := m.r.SetLinkDNS(ctx, idx, linkServers); err != nil {
		return fail("SetLinkDNS", err)
	}
	fault.Point("resolved-link-dns")
	if err := m.r.SetLinkDomains(ctx, idx, domains); err != nil {
		return fail("SetLinkDomains", err)
	}
	fault.Point("resolved-link-domains")
	// Without this, resolved may also send names outside the cluster
	// domains to the tunnel. Older resolved (< 240) lacks the call; the
	// routing-only domains then keep it off the default route anyway.
	if err := m.r.SetLinkDefaultRoute(ctx, idx, false); err != nil {
		m.log.Debug("dns: SetLinkDefaultRoute", "err", err)
	}
	// Answers cached before connecting (the public address of a cluster
	// name) must not outlive the change.
	if err := m.r.FlushCaches(ctx); err != nil {
		m.log.Debug("dns: FlushCaches", "err", err)
	}
	if !slices.EqualFunc(m.routes, routes, routeEqual) {
		m.log.Info("dns: cluster domains routed through the tunnel", "interface", m.opt.Interface,
			"servers", fmt.Sprint(servers), "link", fmt.Sprint(linkServers), "domains", strings.Join(domains, ","))
	}
	m.routes = slices.Clone(routes)
	return nil
}

func routeEqual(a, b Route) bool {
	return a.CID == b.CID && a.Server == b.Server && slices.Equal(a.Domains, b.Domains)
}

// revert undoes the link's configuration, if any.
func (m *resolvedMode) revert(ctx context.Context) error {
	m.stopSplitter()
	if m.rec == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	if err := m.r.RevertLink(ctx, m.rec.Index); err != nil && m.linkStillThere() {
		return fmt.Errorf("dns: systemd-resolved RevertLink on %s (link %d): %w", m.rec.Interface, m.rec.Index, err)
	}
	_ = m.r.FlushCaches(ctx)
	if err := m.j.forget(*m.rec); err != nil {
		return err
	}
	m.log.Info("dns: tunnel link reverted in systemd-resolved", "interface", m.rec.Interface)
	m.rec = nil
	return nil
}

func (m *resolvedMode) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.routes = nil
	err := m.revert(context.Background())
	if cerr := m.r.Close(); err == nil {
		err = cerr
	}
	return err
}

// linkStillThere says whether the recorded link still exists under the same
// name and index; when it does not, resolved has dropped its configuration
// with it and there is nothing left to revert.
func (m *resolvedMode) linkStillThere() bool {
	idx, err := m.opt.InterfaceIndex(m.rec.Interface)
	return err == nil && idx == m.rec.Index
}
