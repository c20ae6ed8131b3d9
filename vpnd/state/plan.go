package state

import (
	"net/netip"
	"slices"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/wgcfg"
)

// Plan is what the daemon applies: the tunnel's configuration and the DNS
// routes of the connected clusters.
type Plan struct {
	Tunnel wgcfg.Config
	DNS    []dnsplit.Route
}

// Want derives the plan from the inputs. With no live session it is empty:
// every peer, route and DNS route goes, while the prefs keep what the user
// wanted so that the next session restores it.
func Want(in *Inputs) Plan {
	var p Plan
	if sessionState(in) != signedIn || in.Map == nil {
		return p
	}
	if a, err := deviceAddress(in.Map, in.Trust); err == nil && a.IsValid() {
		p.Tunnel.Addresses = []netip.Prefix{a}
	} else {
		return p // no address: nothing can flow yet
	}
	cs := joined(in.Map, in.Trust)
	rp := planReach(in, cs)
	if rp.v6 {
		a6 := api.DeviceAddr6(p.Tunnel.Addresses[0].Addr())
		p.Tunnel.Addresses = append(p.Tunnel.Addresses, netip.PrefixFrom(a6, 128))
	}
	for _, cid := range in.Prefs.Wanted {
		c, ok := cs[cid]
		if !ok || c.err != nil || !c.cc.VPN.Ready {
			continue
		}
		delete(cs, cid) // a cid wanted twice is still one peer
		peer := c.peer
		peer.Epoch = c.cc.VPN.ServerStartedAt
		switch {
		case c.dns.IsValid():
			peer.Probe = netip.AddrPortFrom(c.dns, 53)
		case c.server.IsValid():
			peer.Probe = netip.AddrPortFrom(c.server, 53)
		}
		peer.AllowedIPs = append(slices.Clone(c.peer.AllowedIPs), rp.extra[cid]...)
		p.Tunnel.Peers = append(p.Tunnel.Peers, peer)
		p.Tunnel.Routes = append(p.Tunnel.Routes, peer.AllowedIPs...)
		if c.dns.IsValid() && len(c.domains) > 0 {
			domains := slices.Clone(c.domains)
			if cid == rp.def {
				domains = append(domains, ServiceDomain)
			}
			p.DNS = append(p.DNS, dnsplit.Route{CID: cid, Server: c.dns, Domains: domains})
		}
	}
	return p
}

// NextChange returns the first instant after in.Now at which time alone
// changes what Derive or Want give (a session lapsing, a handshake going
// stale, the last-hour warning); zero when nothing is pending.
func NextChange(in *Inputs) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(in.Now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if sessionState(in) != signedIn {
		return next
	}
	if e := in.Prefs.ExpiresAt; !e.IsZero() {
		consider(e)
		consider(e.Add(-expiryWarning))
	}
	for _, pr := range Want(in).Tunnel.Peers {
		r, ok := in.Device.Peer(pr.PublicKey)
		if !ok {
			continue
		}
		if r.LastHandshake.IsZero() {
			consider(r.AddedAt.Add(noHandshakeGrace))
		} else {
			consider(r.LastHandshake.Add(localapi.HandshakeFresh))
		}
		if h := heard(r); !r.SentSince.IsZero() && !h.IsZero() && !r.SentSince.Before(h) {
			consider(later(h.Add(silentFor), r.SentSince.Add(answerWait)))
		}
	}
	return next
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// up is peerUp: the server answers (answering), over a handshake made
// since the network last changed and since the daemon last woke (then the
// tunnel handshakes afresh, and an older session carries nothing any more).
func up(in *Inputs, r wgcfg.PeerReport) bool {
	hs := r.LastHandshake
	return answering(r, in.Now) && !hs.Before(in.NetworkChangedAt) && !hs.Before(in.Slept.To)
}
