package vpnd

import (
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/wgcfg"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// counters are the daemon's own metrics (localapi.Metrics): what it saw
// of the device on its reads and of its status as it changed. They are
// kept apart from the derived status so that a byte counter moving never
// publishes a new status. mu of the daemon guards them.
type counters struct {
	since    time.Time
	peers    map[wgtypes.Key]peerSeen // the device's counters at the last read
	clusters map[string]*localapi.ClusterMetrics
	everUp   map[string]bool   // the cluster's peer was up at least once
	server   map[string]string // the cluster's server key last seen
	pending  map[string]bool   // a reconnect to count when the peer is next up
	path     map[string]string // the cluster's path last seen
	control  uint64            // reconnects to control
}

type peerSeen struct {
	rx, tx  int64
	hs      time.Time
	retries uint64
}

func newCounters(now time.Time) *counters {
	return &counters{since: now, peers: map[wgtypes.Key]peerSeen{}, clusters: map[string]*localapi.ClusterMetrics{},
		everUp: map[string]bool{}, server: map[string]string{}, pending: map[string]bool{}, path: map[string]string{}}
}

func (c *counters) cluster(cid string) *localapi.ClusterMetrics {
	m := c.clusters[cid]
	if m == nil {
		m = &localapi.ClusterMetrics{CID: cid}
		c.clusters[cid] = m
	}
	return m
}

// observeDevice adds what the device's counters moved since the last read,
// per cluster (cfg says which peer is which cluster). A counter that went
// down belongs to a peer configured anew (same key re-created by a nudge):
// it counts from zero. A new handshake time is a handshake.
func (c *counters) observeDevice(r wgcfg.Report, cfg wgcfg.Config) {
	if r.Err != "" {
		return // a failed read says nothing
	}
	seen := make(map[wgtypes.Key]peerSeen, len(r.Peers))
	for _, p := range r.Peers {
		i := slices.IndexFunc(cfg.Peers, func(cp wgcfg.Peer) bool { return cp.PublicKey == p.PublicKey })
		if i < 0 || cfg.Peers[i].CID == "" {
			continue
		}
		m := c.cluster(cfg.Peers[i].CID)
		prev := c.peers[p.PublicKey]
		m.RxBytes += grown(prev.rx, p.RxBytes)
		m.TxBytes += grown(prev.tx, p.TxBytes)
		if !p.LastHandshake.IsZero() && p.LastHandshake.After(prev.hs) {
			m.Handshakes++
		}
		if p.HandshakeRetries < prev.retries { // the engine tracks the peer anew
			prev.retries = 0
		}
		m.HandshakeRetries += p.HandshakeRetries - prev.retries
		seen[p.PublicKey] = peerSeen{rx: p.RxBytes, tx: p.TxBytes, hs: p.LastHandshake, retries: p.HandshakeRetries}
	}
	c.peers = seen
}

func grown(prev, cur int64) uint64 {
	if cur < prev {
		return uint64(max(cur, 0))
	}
	return uint64(cur - prev)
}

// observeStatus counts path switches and reconnects: a cluster's peer up
// again after it was down, or up with a new server (a move, even one so
// quick that no status in between showed the peer down). Each reconnect
// counts once, when the peer is up.
func (c *counters) observeStatus(_, cur localapi.Status) {
	for _, cs := range cur.Clusters {
		if cs.State != localapi.ClusterConnected && cs.State != localapi.ClusterConnecting {
			delete(c.path, cs.CID) // the next connect starts afresh: not a switch
			continue
		}
		key := cs.Server.PublicKey
		if last := c.server[cs.CID]; key != "" && last != "" && key != last || !cs.PeerUp && c.everUp[cs.CID] {
			c.pending[cs.CID] = true
		}
		if key != "" {
			c.server[cs.CID] = key
		}
		c.observePath(cs.CID, cs.Path)
		if !cs.PeerUp {
			continue
		}
		if c.pending[cs.CID] {
			c.cluster(cs.CID).Reconnects++
			delete(c.pending, cs.CID)
		}
		c.everUp[cs.CID] = true
	}
}

// observePath counts a switch of a cluster's path (every switch publishes
// a status, as the relay Bind tells the daemon of each).
func (c *counters) observePath(cid, path string) {
	last := c.path[cid]
	if path == "" {
		return
	}
	c.path[cid] = path
	switch {
	case last == "" || last == path:
	case path == localapi.PathRelay:
		c.cluster(cid).ToRelay++
	case path == localapi.PathDirect:
		c.cluster(cid).ToDirect++
	}
}

// snapshot is the metrics as the local API answers them.
func (c *counters) snapshot(dns localapi.DNSMetrics) localapi.Metrics {
	m := localapi.Metrics{Since: c.since, DNS: dns, ControlReconnects: c.control, Clusters: []localapi.ClusterMetrics{}}
	for _, cm := range c.clusters {
		m.Clusters = append(m.Clusters, *cm)
	}
	slices.SortFunc(m.Clusters, func(a, b localapi.ClusterMetrics) int { return strings.Compare(a.CID, b.CID) })
	return m
}
