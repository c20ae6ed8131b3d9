// Package rules holds the operator rules of the product docs
// (shared/reference/runos-clusters-and-nodes.txt: "Turning the user VPN
// on", "Moving the VPN server to another node", "Remove a node") as pure
// functions of the records involved. Each refusal is an *api.Error whose
// message names the rule in the docs' words and whose hint says what to do
// instead; callers run them inside the transaction that would make the
// change and roll back on a refusal, so a refusal changes nothing.
package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/internal/relaywire"
)

func refused(msg, hint string) *api.Error {
	return &api.Error{Status: 409, Code: api.CodeRefused, Message: msg, Hint: hint}
}

func conflict(msg, hint string) *api.Error {
	return &api.Error{Status: 409, Code: api.CodeConflict, Message: msg, Hint: hint}
}

func invalid(msg, hint string) *api.Error {
	return &api.Error{Status: 400, Code: api.CodeInvalid, Message: msg, Hint: hint}
}

// MoveCommand is the exact command that moves a cluster's VPN server.
func MoveCommand(serviceID, cid, target string) string {
	if target == "" {
		target = "<nid>"
	}
	return fmt.Sprintf("runos services wireguard move %s --cid %s --target-node-id %s --follow", serviceID, cid, target)
}

// Endpoint is what devices dial for a service hosted on n: the node's
// declared ingress address, else its detected public address, and the
// service port. ok is false when the node has neither address.
func Endpoint(n model.Node, port int) (endpoint, kind string, ok bool) {
	a := n.Ingress()
	if !a.IsValid() {
		return "", "", false
	}
	return netip.AddrPortFrom(a, uint16(port)).String(), model.AddressKind(a), true
}

// RelayURL is the relay devices are given for svc hosted on n: the
// service's override with the ingress address put in, else the node's
// ingress on 443 (where Traefik routes the relay's path to the gateway).
// "" when n has no ingress address.
func RelayURL(n model.Node, svc model.Service) string {
	a := n.Ingress()
	if !a.IsValid() {
		return ""
	}
	host := a.String()
	if a.Is6() {
		host = "[" + host + "]"
	}
	def := "https://" + host + relaywire.Path
	if svc.RelayURL == "" {
		return def
	}
	out := strings.ReplaceAll(svc.RelayURL, api.RelayIngress, host)
	// An override on an address that is not this node's (set before a
	// move, or before the ingress changed) is never given: the device
	// would hand that host its relay ticket and its traffic. A name is
	// given; the daemon dials it only if it resolves to the node.
	if u, err := api.ParseRelayURL(out); err != nil {
		return def
	} else if _, err := api.RelayHostIs(u, a); err != nil {
		return def
	}
	return out
}

// ingressSource says where a node's ingress address comes from.
func ingressSource(n model.Node) string {
	if n.DeclaredIngress.IsValid() {
		return n.NID + "'s declared ingress address"
	}
	return n.NID + "'s detected public address, as it declares no ingress address"
}

// CheckAddService refuses a WireGuard server where the docs do: a second
// one in the cluster, or any where the cluster's user VPN is NetBird.
func CheckAddService(c model.Cluster, existing []model.Service) *api.Error {
	if c.UserVPN == api.UserVPNNetBird {
		return refused(
			fmt.Sprintf("the user VPN of %s is NetBird: you pick one of WireGuard or NetBird; they are mutually exclusive", c.CID),
			fmt.Sprintf("reach %s through its NetBird VPN; to run a WireGuard server there instead, turn the cluster's NetBird user VPN off first", c.CID))
	}
	if len(existing) > 0 {
		s := existing[0]
		return refused(
			fmt.Sprintf("%s already runs a WireGuard VPN server (%s on %s): a cluster runs one user-VPN server", c.CID, s.ID, s.NodeID),
			"move it instead: "+MoveCommand(s.ID, c.CID, ""))
	}
	return nil
}

// GatewayRole is the role a node's gateway plays for svc, given the
// service's move in flight (nil if none): standby for the target while the
// move prepares, draining for the old node while devices switch, active for
// the hosting node, "" (serve nothing) otherwise.
func GatewayRole(svc model.Service, mv *model.Move, nid string) string {
	if mv != nil {
		switch {
		case mv.State == api.MovePreparing && nid == mv.TargetNodeID:
			return api.GatewayStandby
		case mv.State == api.MoveSwitching && nid == mv.FromNodeID:
			return api.GatewayDraining
		}
	}
	if svc.NodeID == nid {
		return api.GatewayActive
	}
	return ""
}

// Heartbeats decides a node's status from its heartbeats ("Miss heartbeats
// for 30 seconds and it flips to no_heartbeat"), counting control's own
// outage: heartbeats cannot arrive while control is down, so a node heard
// from before control came up (Since) is not no_heartbeat until it has had
// a full window (Timeout) since then to report again. A node never heard
// from is no_heartbeat.
type Heartbeats struct {
	Timeout time.Duration
	Since   time.Time // when this control came up
}

// Status is ready or no_heartbeat at now.
func (h Heartbeats) Status(n model.Node, now time.Time) string {
	last := n.LastHeartbeat
	if !last.IsZero() && last.Before(h.Since) {
		last = h.Since
	}
	return n.WithHeartbeat(last).Status(now, h.Timeout)
}

// Unheard reports whether control has not heard from n since it came up:
// within the grace above, its status says ready on the strength of
// heartbeats before the outage.
func (h Heartbeats) Unheard(n model.Node) bool { return n.LastHeartbeat.Before(h.Since) }

// PlanMove says what moving svc from its node to target would give
// devices, with the docs' warning when the address changes between private
// and public. It refuses a move to the node already hosting the server and
// to a node devices could not dial.
func PlanMove(svc model.Service, from, target model.Node, now time.Time, hb Heartbeats, readyTimeout time.Duration) (api.MovePlan, *api.Error) {
	if target.NID == from.NID {
		return api.MovePlan{}, conflict(
			fmt.Sprintf("the VPN server of %s already runs on %s", svc.CID, target.NID),
			"pick another node: runos nodes list --cid "+svc.CID)
	}
	ep, kind, ok := Endpoint(target, svc.Port)
	if !ok {
		return api.MovePlan{}, refused(
			fmt.Sprintf("devices would be given no address: %s has no declared ingress address and no detected public address", target.NID),
			fmt.Sprintf("declare one first: runos nodes ingress %s --cid %s --ingress-ip <ip>", target.NID, svc.CID))
	}
	plan := api.MovePlan{
		FromNodeID:   from.NID,
		TargetNodeID: target.NID,
		Endpoint:     ep,
		AddressKind:  kind,
		Warnings:     []string{},
	}
	if pep, pkind, ok := Endpoint(from, svc.Port); ok {
		plan.PreviousEndpoint, plan.PreviousAddressKind = pep, pkind
	}
	switch {
	case plan.PreviousAddressKind == api.AddressPrivate && kind == api.AddressPublic:
		plan.Warnings = append(plan.Warnings, fmt.Sprintf(
			"devices will be given %s, a public address (%s), instead of the private %s: "+
				"machines on your own network will usually lose the tunnel, because most routers will not route a public address back inside; "+
				"if your devices connect from your own network, give %s a private ingress address first: "+
				"runos nodes ingress %s --cid %s --ingress-ip <private-ip> --ingress-not-published",
			ep, ingressSource(target), plan.PreviousEndpoint, target.NID, target.NID, svc.CID))
	case plan.PreviousAddressKind == api.AddressPublic && kind == api.AddressPrivate:
		plan.Warnings = append(plan.Warnings, fmt.Sprintf(
			"devices will be given %s, a private address (%s), instead of the public %s: "+
				"only devices that can reach that private network will keep the tunnel",
			ep, ingressSource(target), plan.PreviousEndpoint))
	}
	if hb.Status(target, now) != api.NodeReady {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf(
			"%s is %s (its gateway is not heartbeating): the move fails unless its gateway brings the server up within %s",
			target.NID, api.NodeNoHeartbeat, readyTimeout))
	}
	return plan, nil
}

// CheckStartMove adds to PlanMove's refusals what only a real move needs:
// a serving service and no other move in flight.
func CheckStartMove(svc model.Service, inFlight *model.Move) *api.Error {
	if inFlight != nil {
		return conflict(
			fmt.Sprintf("a move of %s is already in flight (%s, %s → %s, %s)", svc.ID, inFlight.ID, inFlight.FromNodeID, inFlight.TargetNodeID, inFlight.State),
			"wait for it: runos services wireguard show "+svc.ID+" --cid "+svc.CID)
	}
	if svc.State != api.ServiceServing {
		return conflict(
			fmt.Sprintf("the VPN server %s is %s, not serving: there is nothing to move yet", svc.ID, svc.State),
			"wait until it serves: runos services wireguard show "+svc.ID+" --cid "+svc.CID)
	}
	return nil
}

// ApplyNodeIngress returns n changed by req, or the refusal. Withholding the
// last DNS-published control plane is allowed only together with a
// dialable private ingress address.
func ApplyNodeIngress(c model.Cluster, nodes []model.Node, n model.Node, req api.NodeIngressRequest) (model.Node, *api.Error) {
	out := n
	if req.IngressIP != "" {
		a, err := netip.ParseAddr(req.IngressIP)
		if err != nil {
			return n, invalid(fmt.Sprintf("ingress IP %q is not an IP address", req.IngressIP), "give an address such as 10.77.0.21")
		}
		if !model.Dialable(a) {
			return n, invalid(fmt.Sprintf("ingress IP %s is not an address devices could dial", a),
				"give a unicast address that is not loopback, link-local or unspecified")
		}
		out.DeclaredIngress = a.Unmap()
	}
	if req.Published != nil {
		out.Published = *req.Published
	}
	withholding := n.Published && !out.Published
	if withholding && n.IsControlPlane() && !otherPublishedControlPlane(nodes, n.NID) {
		a := out.DeclaredIngress
		if !a.IsValid() || !model.Dialable(a) || model.AddressKind(a) != api.AddressPrivate {
			return n, refused(
				fmt.Sprintf("withholding %s, the last DNS-published control plane of %s, is allowed only together with a dialable private --ingress-ip; "+
					"without one the call is refused, because the cluster would then keep no address anyone could dial", n.NID, c.CID),
				fmt.Sprintf("give it a private ingress address in the same call: runos nodes ingress %s --cid %s --ingress-ip <lan-ip> --ingress-not-published", n.NID, c.CID))
		}
	}
	return out, nil
}

func otherPublishedControlPlane(nodes []model.Node, nid string) bool {
	for _, o := range nodes {
		if o.NID != nid && o.Published && o.IsControlPlane() {
			return true
		}
	}
	return false
}

func controlPlanes(nodes []model.Node) int {
	n := 0
	for _, o := range nodes {
		if o.IsControlPlane() {
			n++
		}
	}
	return n
}

// CheckDeleteNode refuses removing the node that hosts (or is about to
// host) the VPN server, and the last control-plane node unless the cluster
// is reset.
func CheckDeleteNode(c model.Cluster, nodes []model.Node, svcs []model.Service, inFlight []model.Move, n model.Node, resetCluster bool) *api.Error {
	for _, s := range svcs {
		if s.NodeID == n.NID {
			return refused(
				fmt.Sprintf("%s hosts the VPN server of %s (%s): a node that hosts the VPN server refuses deletion; move the server off it first", n.NID, c.CID, s.ID),
				MoveCommand(s.ID, c.CID, suggestTarget(nodes, n.NID)))
		}
	}
	for _, m := range inFlight {
		if m.TargetNodeID == n.NID || m.FromNodeID == n.NID {
			return conflict(
				fmt.Sprintf("%s takes part in the move %s of the VPN server (%s)", n.NID, m.ID, m.State),
				"wait for the move to finish: runos services wireguard show "+m.ServiceID+" --cid "+c.CID)
		}
	}
	if n.IsControlPlane() && controlPlanes(nodes) == 1 && !resetCluster {
		return refused(
			fmt.Sprintf("%s is the last control-plane node of %s: you cannot remove the last control-plane node normally; "+
				"the delete is refused unless you also reset the cluster (--reset-cluster), which is irreversible", n.NID, c.CID),
			fmt.Sprintf("add another control-plane node first, or reset the cluster: runos nodes delete %s --cid %s --reset-cluster", n.NID, c.CID))
	}
	return nil
}

// suggestTarget names the other node when there is exactly one.
func suggestTarget(nodes []model.Node, nid string) string {
	var others []string
	for _, o := range nodes {
		if o.NID != nid {
			others = append(others, o.NID)
		}
	}
	if len(others) == 1 {
		return others[0]
	}
	return ""
}

// DeletePreflight says what removing n would refuse (as DELETE would) and
// warns, without ever blocking, when etcd would be left on an even
// voting-member count.
func DeletePreflight(c model.Cluster, nodes []model.Node, svcs []model.Service, inFlight []model.Move, n model.Node, resetCluster bool) api.DeletePreflight {
	p := api.DeletePreflight{Warnings: []string{}, Refusals: []string{}}
	if e := CheckDeleteNode(c, nodes, svcs, inFlight, n, resetCluster); e != nil {
		p.Refusals = append(p.Refusals, e.Error())
	}
	if n.IsControlPlane() {
		left := controlPlanes(nodes) - 1
		if left > 0 && left%2 == 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf(
				"removing %s would leave etcd on %d voting members, an even count: HA needs an odd number of control-plane nodes so etcd keeps quorum (3 is the standard count); "+
					"this is advisory and does not block the delete", n.NID, left))
		}
	}
	return p
}

// recordAddr is the address a published node puts in the public records:
// a public ingress address, else its public address, else whatever it
// declared (an intranet-only record).
func recordAddr(n model.Node) netip.Addr {
	if a := n.DeclaredIngress; a.IsValid() && model.AddressKind(a) == api.AddressPublic {
		return a
	}
	if a := n.Public(); a.IsValid() {
		return a
	}
	return n.DeclaredIngress
}

// DNSRecords are the cluster's public DNS records: k8s.<domain> for the
// published control planes (external kubectl) and *.<domain> for the
// published nodes (public app ingress). A withheld node leaves them;
// re-publishing it puts it back.
func DNSRecords(c model.Cluster, nodes []model.Node) []api.DNSRecord {
	var k8s, apps []netip.Addr
	for _, n := range nodes {
		if !n.Published {
			continue
		}
		a := recordAddr(n)
		if !a.IsValid() {
			continue
		}
		apps = append(apps, a)
		if n.IsControlPlane() {
			k8s = append(k8s, a)
		}
	}
	out := []api.DNSRecord{}
	out = append(out, records("k8s."+c.Domain(), k8s)...)
	out = append(out, records("*."+c.Domain(), apps)...)
	return out
}

func records(name string, addrs []netip.Addr) []api.DNSRecord {
	var v4, v6 []string
	for _, a := range addrs {
		if a.Unmap().Is4() {
			v4 = append(v4, a.Unmap().String())
		} else {
			v6 = append(v6, a.String())
		}
	}
	var out []api.DNSRecord
	for _, r := range []struct {
		typ  string
		vals []string
	}{{"A", v4}, {"AAAA", v6}} {
		if len(r.vals) == 0 {
			continue
		}
		sort.Strings(r.vals)
		out = append(out, api.DNSRecord{Name: name, Type: r.typ, Values: slices.Compact(r.vals)})
	}
	return out
}
