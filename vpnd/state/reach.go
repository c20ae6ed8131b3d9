package state

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// What the laptop routes into each wanted cluster beyond its VPN server
// (issue 21): the cluster's mapped IPv6 range always (its names resolve
// there, so two clusters with the same internal ranges are both reached),
// and its raw internal ranges where nothing else claims them — the default
// cluster first, then the others by cid, never over the laptop's own
// networks.

// ServiceDomain is the in-cluster domain routed to the default cluster.
const ServiceDomain = "svc.cluster.local"

// reachPlan is the routes into the clusters, by cid.
type reachPlan struct {
	def    string                    // the default cluster ("" when none is connected)
	extra  map[string][]netip.Prefix // routed beyond the VPN subnet: raw ranges and the mapped range
	status map[string]*localapi.ClusterReach
	v6     bool // some cluster has a mapped range: the device needs its IPv6 address
}

// defaultCluster is the cluster raw addresses go to first: the one the
// user made default (Prefs.DefaultCID) when it is wanted, else the first
// wanted by cid.
func defaultCluster(in *Inputs, usable func(string) bool) string {
	if def := in.Prefs.DefaultCID; def != "" && slices.Contains(in.Prefs.Wanted, def) && usable(def) {
		return def
	}
	for _, cid := range in.Prefs.Wanted {
		if usable(cid) {
			return cid
		}
	}
	return ""
}

// planReach derives the routes of every wanted, usable cluster of cs.
func planReach(in *Inputs, cs map[string]*cluster) reachPlan {
	rp := reachPlan{extra: map[string][]netip.Prefix{}, status: map[string]*localapi.ClusterReach{}}
	usable := func(cid string) bool {
		c := cs[cid]
		return c != nil && c.err == nil && c.cc.VPN.Ready && c.cc.Inside != nil
	}
	rp.def = defaultCluster(in, usable)
	order := []string{}
	if rp.def != "" {
		order = append(order, rp.def)
	}
	for _, cid := range in.Prefs.Wanted {
		if cid != rp.def && usable(cid) && !slices.Contains(order, cid) {
			order = append(order, cid)
		}
	}
	type claim struct {
		p  netip.Prefix
		by string
	}
	var claimed []claim
	for _, a := range in.Network.Addrs {
		if a.Addr.Addr().Is4() {
			claimed = append(claimed, claim{a.Addr.Masked(), fmt.Sprintf("the local network (%s %s)", a.Iface, a.Addr.Masked())})
		}
	}
	for _, cid := range order {
		in := cs[cid].cc.Inside
		st := &localapi.ClusterReach{Default: cid == rp.def, Routed: []string{}, Shadowed: []localapi.ShadowedRange{}}
		rp.status[cid] = st
		if m, err := netip.ParsePrefix(in.Mapped); err == nil && m.Bits() == 96 && api.MappedPool.Contains(m.Addr()) {
			st.Mapped = m.String()
			rp.extra[cid] = append(rp.extra[cid], m)
			rp.v6 = true
		} else if in.Mapped != "" {
			st.Refused = append(st.Refused, fmt.Sprintf("mapped range %q is not a /96 of %s", in.Mapped, api.MappedPool))
		}
		for _, p := range in.Prefixes() {
			if !p.Addr().IsPrivate() || p.Bits() < 8 {
				st.Refused = append(st.Refused, fmt.Sprintf("%s is not a private range: never routed into the tunnel", p))
				continue
			}
			i := slices.IndexFunc(claimed, func(c claim) bool { return c.p.Overlaps(p) })
			if i >= 0 {
				st.Shadowed = append(st.Shadowed, localapi.ShadowedRange{Prefix: p.String(), By: claimed[i].by})
				continue
			}
			claimed = append(claimed, claim{p, cid})
			st.Routed = append(st.Routed, p.String())
			rp.extra[cid] = append(rp.extra[cid], p)
		}
	}
	return rp
}
