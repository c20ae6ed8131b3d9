package dnsplit

import (
	"net"
	"net/netip"
)

// Why systemd-resolved mode needs a splitter once two clusters are
// connected.
//
// resolved routes by link, not by server: every cluster shares the one
// tunnel link, and a link's servers are tried in turn for every name its
// ~domains route there. Given each cluster's server directly, resolved
// would send a name of cluster A to cluster B's gateway whenever B's server
// is the link's current one: a wasted round trip over the tunnel (B
// refuses, resolved tries the next server) and, worse, A's names shown to
// B's gateway, which may be another account's cluster.
//
// So with two or more cluster servers the link gets one server, the
// device's own tunnel address, where the daemon serves the forwarder with
// one zone per cluster domain and REFUSED for anything else: each name goes
// to its own cluster's server and nowhere else. resolved binds its socket to
// the tunnel link, and the kernel delivers a packet to the link's own
// address locally (it never enters the tunnel). The splitter answers only
// that local source. With one cluster the server itself is the link's:
// nothing to split, no hop added.
//
// If the splitter cannot listen there (another program holds port 53 on
// every address), the link gets the servers themselves, as before: names
// still resolve, with the cost above, and the reason is logged.

// splitter is the forwarder serving the tunnel link in resolved mode.
type splitter struct {
	fwd  *forwarder
	addr netip.AddrPort
}

// splitTable routes each cluster's domains to its server and refuses the rest.
func splitTable(routes []Route) *forwardTable {
	t := newForwardTable(routes, nil, 0, netip.AddrPort{})
	t.upstreams, t.refuseOthers = nil, true
	return t
}

// linkServers is the servers the tunnel link gets for routes: the cluster
// servers themselves when there is one, else the splitter's address
// (started, moved or retabled as needed).
func (m *resolvedMode) linkServers(routes []Route, servers []netip.Addr) []netip.Addr {
	if len(servers) < 2 {
		m.stopSplitter()
		return servers
	}
	a, err := m.opt.InterfaceAddr(m.opt.Interface)
	if err != nil {
		m.log.Warn("dns: no splitter for several clusters on one link: resolved gets every cluster's server", "interface", m.opt.Interface, "err", err)
		m.stopSplitter()
		return servers
	}
	if m.split != nil && m.split.addr.Addr() != a {
		m.stopSplitter() // the tunnel's address changed
	}
	if m.split != nil {
		m.split.fwd.setTable(splitTable(routes))
		return []netip.Addr{a}
	}
	f := newForwarder(m.log, m.opt.Now, m.splitEx, splitTable(routes))
	f.only = a
	f.counts = &m.counts
	if err := f.listen(netip.AddrPortFrom(a, m.splitPort)); err != nil {
		f.close()
		m.log.Warn("dns: no splitter for several clusters on one link: resolved gets every cluster's server", "interface", m.opt.Interface, "err", err)
		return servers
	}
	addr := netip.AddrPortFrom(a, f.pc.LocalAddr().(*net.UDPAddr).AddrPort().Port())
	m.split = &splitter{fwd: f, addr: addr}
	m.log.Info("dns: several clusters on one link: resolved asks the splitter on the tunnel's own address, which asks each cluster's server for its own names only",
		"interface", m.opt.Interface, "splitter", addr.String())
	return []netip.Addr{a}
}

// stopSplitter closes the splitter, if one runs.
func (m *resolvedMode) stopSplitter() {
	if m.split == nil {
		return
	}
	m.split.fwd.close()
	m.log.Debug("dns: splitter stopped", "splitter", m.split.addr.String())
	m.split = nil
}

// splitMoved says whether the splitter runs on an address the tunnel no
// longer has (its address changed): the link must be set again.
func (m *resolvedMode) splitMoved() bool {
	if m.split == nil {
		return false
	}
	a, err := m.opt.InterfaceAddr(m.opt.Interface)
	return err != nil || a != m.split.addr.Addr()
}
