package tunnel

import (
	"crypto/tls"
	"net/netip"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/vpnd/relay"
	"github.com/runos/vpn/vpnd/wgcfg"
)

// Options are what NewWith adds to New.
type Options struct {
	MTU int // the tunnel's MTU; 0: DefaultMTU
	// RelayToken returns the session's access token, which the relay of a
	// cluster's node checks with control; nil: the relay is never used.
	RelayToken func() string
	RelayTLS   func() (*tls.Config, error) // verifies the relays' certificates (made at the first dial)
	// OnPathChange is called when a cluster's path (direct or relay), its
	// relay connection or a captive portal's finding changes.
	OnPathChange func()
}

// newBind is wireguard-go's own Bind under vpnd/relay's, which sends each
// cluster's datagrams over UDP or, where UDP gets no answer, over that
// cluster's relay.
func (e *Engine) newBind(key wgtypes.Key, opt Options) *relay.Bind {
	token := opt.RelayToken
	if token == nil {
		token = func() string { return "" }
	}
	return relay.New(relay.Config{
		Inner:       conn.NewDefaultBind(),
		Log:         e.log.With("component", "relay"),
		Key:         key.PublicKey(),
		Token:       token,
		TLS:         opt.RelayTLS,
		Rehandshake: e.rehandshakeAt,
		OnChange:    opt.OnPathChange,
	})
}

// dests are the peers as the Bind serves them (no relay without a token
// to show it: then the Bind never falls back).
func dests(cfg wgcfg.Config) []relay.Dest {
	out := make([]relay.Dest, 0, len(cfg.Peers))
	for _, p := range cfg.Peers {
		out = append(out, relay.Dest{CID: p.CID, Endpoint: p.Endpoint, RelayURL: p.Relay})
	}
	return out
}

// rehandshakeAt re-handshakes the peer at ep (the Bind's probe).
func (e *Engine) rehandshakeAt(ep netip.AddrPort) {
	e.mu.Lock()
	var keys []wgtypes.Key
	for _, p := range e.applied.Peers {
		if p.Endpoint == ep {
			keys = append(keys, p.PublicKey)
		}
	}
	e.mu.Unlock()
	e.handshakeAll(keys)
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
// relay decision is open again, and every peer re-handshakes at once with
// its current keys expired: a server that forgot them (a long sleep) or a
// path that lost them (a new NAT) never gets packets it cannot read, and
// wireguard-go's 5-second spacing of handshakes cannot hold the new one
// back. Packets wait for the handshake (one round trip).
func (e *Engine) NetworkChanged() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	keys := make([]wgtypes.Key, 0, len(e.applied.Peers))
	for _, p := range e.applied.Peers {
		keys = append(keys, p.PublicKey)
	}
	e.mu.Unlock()
	err := e.dev.BindUpdate()
	e.bind.NetworkChanged()
	for _, k := range keys {
		if p := e.lookupPeer(k); p != nil {
			p.ExpireCurrentKeypairs()
		}
	}
	e.handshakeAll(keys)
	return err
}

// handshakeAll asks wireguard-go for a handshake with each peer now
// (Handshake; wireguard-go sends at most one per peer every 5 s).
func (e *Engine) handshakeAll(keys []wgtypes.Key) {
	for _, k := range keys {
		if err := e.Handshake(k); err != nil {
			e.log.Debug("handshake", "interface", e.name, "peer", k.String(), "err", err)
		}
	}
}

// lookupPeer is wireguard-go's peer of key (nil when it has none).
func (e *Engine) lookupPeer(k wgtypes.Key) *device.Peer {
	return e.dev.LookupPeer(device.NoisePublicKey(k))
}
