package state

import (
	"net/netip"
	"slices"
	"time"

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
	for _, cid := range in.Prefs.Wanted {
		c, ok := cs[cid]
		if !ok || c.err != nil || !c.cc.VPN.Ready {
			continue
		}
		delete(cs, cid) // a cid wanted twice is still one peer
		p.Tunnel.Peers = append(p.Tunnel.Peers, c.peer)
		p.Tunnel.Routes = append(p.Tunnel.Routes, c.peer.AllowedIPs...)
		if c.dns.IsValid() && len(c.domains) > 0 {
			p.DNS = append(p.DNS, dnsplit.Route{CID: cid, Server: c.dns, Domains: slices.Clone(c.domains)})
		}
	}
	return p
}

// FastRead reports whether some wanted cluster's peer has no fresh
// handshake: the daemon then reads the device every 50 ms instead of every
// 5 s, so peerUp turns true moments after the handshake.
func FastRead(in *Inputs) bool {
	for _, pr := range Want(in).Tunnel.Peers {
		r, ok := in.Device.Peer(pr.PublicKey)
		if !ok || !fresh(r.LastHandshake, in.Now) {
			return true
		}
	}
	return false
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
	}
	return next
}

func fresh(hs, now time.Time) bool {
	return !hs.IsZero() && now.Sub(hs) < localapi.HandshakeFresh
}
