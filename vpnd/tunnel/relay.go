package tunnel

import (
	"context"
	"crypto/tls"
	"net/netip"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/vpnd/relay"
	"github.com/runos/vpn/vpnd/wgcfg"
	"github.com/runos/vpn/wghost"
)

// Options are what NewWith adds to New.
type Options struct {
	MTU int // the tunnel's MTU; 0: DefaultMTU
	// RelayTicket asks control for the relay ticket of a cluster's VPN
	// node, which that node's relay checks with control; nil: the relay
	// is never used.
	RelayTicket func(ctx context.Context, cid string) (ticket string, expires time.Time, err error)
	RelayTLS    func() (*tls.Config, error) // verifies the relays' certificates (made at the first dial)
	// OnPathChange is called when a cluster's path (direct or relay), its
	// relay connection or a captive portal's finding changes.
	OnPathChange func()
	// OnHandshake is called when a handshake the tunnel initiated has
	// completed (the device's read shows it from then on).
	OnHandshake func()
	// RouteMTU is the MTU of the path the OS's routing table gives to dst
	// (platform/netmon.RouteMTU); nil or an error: the uplink MTU the
	// daemon passes to SetUplinkMTU. The TCP MSS clamp follows it (mss.go).
	RouteMTU func(dst netip.Addr) (int, error)
}

// newBind is wireguard-go's own Bind under vpnd/relay's, which sends each
// cluster's datagrams over UDP or, where UDP gets no answer, over that
// cluster's relay.
func (e *Engine) newBind(key wgtypes.Key, opt Options) *relay.Bind {
	return relay.New(relay.Config{
		Inner:       conn.NewDefaultBind(),
		Log:         e.log.With("component", "relay"),
		Key:         key.PublicKey(),
		Ticket:      opt.RelayTicket,
		TLS:         opt.RelayTLS,
		Rehandshake: e.probeUDP,
		Keepalive:   e.keepaliveTo,
		Ask:         e.askAt,
		OnChange:    opt.OnPathChange,
		OnHandshake: opt.OnHandshake,
	})
}

// dests are the peers as the Bind serves them (no relay without a ticket
// to show it: then the Bind never falls back).
func dests(cfg wgcfg.Config) []relay.Dest {
	out := make([]relay.Dest, 0, len(cfg.Peers))
	for _, p := range cfg.Peers {
		out = append(out, relay.Dest{CID: p.CID, Endpoint: p.Endpoint, RelayURL: p.Relay, Askable: p.Probe.IsValid()})
	}
	return out
}

// probeUDP sends one initiation to the peer at ep as it is (Handshake: its
// session goes on meanwhile), the Bind's UDP probe; wireguard-go sends at
// most one per peer every 5 s.
func (e *Engine) probeUDP(ep netip.AddrPort) {
	e.toPeersAt(ep, "handshake", (*wghost.Host).Handshake)
}

// keepaliveTo sends a keepalive to the peer at ep (the Bind sends it both
// ways when a race begins: see vpnd/relay's decider).
func (e *Engine) keepaliveTo(ep netip.AddrPort) {
	e.toPeersAt(ep, "keepalive", (*wghost.Host).Keepalive)
}

// toPeersAt does what to each peer whose endpoint is ep, on the open host;
// a failure is logged (the Bind asks again when it still needs it).
func (e *Engine) toPeersAt(ep netip.AddrPort, what string, do func(*wghost.Host, wgtypes.Key) error) {
	for _, k := range e.peersAt(ep) {
		if err := e.withHost(func(h *wghost.Host) error { return do(h, k) }); err != nil {
			e.log.Debug(what, "interface", e.name, "peer", k.String(), "err", err)
		}
	}
}

// peersAt is the peers whose endpoint is ep.
func (e *Engine) peersAt(ep netip.AddrPort) []wgtypes.Key {
	e.mu.Lock()
	defer e.mu.Unlock()
	var keys []wgtypes.Key
	for _, p := range e.applied.Peers {
		if p.Endpoint == ep {
			keys = append(keys, p.PublicKey)
		}
	}
	return keys
}

// paths reads the Bind's decisions, by peer. e.mu held.
func (e *Engine) paths() map[wgtypes.Key]wgcfg.PathReport {
	byEP := map[netip.AddrPort]relay.State{}
	for _, st := range e.bind.States() {
		byEP[st.Endpoint] = st
	}
	out := map[wgtypes.Key]wgcfg.PathReport{}
	for _, p := range e.applied.Peers {
		if st, ok := byEP[p.Endpoint]; ok {
			out[p.PublicKey] = wgcfg.PathReport{Path: string(st.Path), Since: st.Since, Reason: st.Reason,
				Relay: st.RelayURL, RelayUp: st.RelayUp, RelayErr: st.RelayErr, Captive: st.Captive}
		}
	}
	return out
}

// NetworkChanged is the daemon's answer to a new network (an address or
// the default route changed, or the machine woke): wireguard-go's sockets
// are bound again (so replies leave from the new address), each cluster's
// relay decision is open again, and every peer handshakes afresh at once
// (Rehandshake: re-created, so a server that forgot its keys after a long
// sleep, or a path that lost them behind a new NAT, never gets packets it
// cannot read, and wireguard-go's 5-second spacing of handshakes cannot
// hold the new one back). Packets wait for the handshake (one round trip).
func (e *Engine) NetworkChanged() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	err := e.host.BindUpdate()
	e.bind.NetworkChanged()
	e.Rehandshake()
	return err
}
