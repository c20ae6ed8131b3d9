package rules

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/model"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const hb, ready = 30 * time.Second, 15 * time.Second

var ky3 = model.Cluster{CID: "ky3", AID: "rjwrn", DomainRoot: "example.com"}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func cp(nid string) model.Node {
	return model.Node{CID: "ky3", NID: nid, Roles: []string{api.RoleControlPlane, api.RoleWorker}, LastHeartbeat: now}
}

func worker(nid string) model.Node {
	return model.Node{CID: "ky3", NID: nid, Roles: []string{api.RoleWorker}, LastHeartbeat: now}
}

func wantErr(t *testing.T, e *api.Error, code string, phrases ...string) {
	t.Helper()
	if e == nil {
		t.Fatalf("no refusal; want %s with %q", code, phrases)
	}
	if e.Code != code {
		t.Fatalf("code = %s, want %s (%s)", e.Code, code, e)
	}
	for _, p := range phrases {
		if !strings.Contains(e.Message+" | "+e.Hint, p) {
			t.Fatalf("refusal %q lacks %q", e.Error(), p)
		}
	}
}

func TestEndpointFallsBackToDetectedPublic(t *testing.T) {
	n := worker("n2")
	if _, _, ok := Endpoint(n, 32768); ok {
		t.Fatal("endpoint for a node with no address")
	}
	n.DetectedIP = addr("198.51.100.99")
	if ep, kind, _ := Endpoint(n, 32768); ep != "198.51.100.99:32768" || kind != api.AddressPublic {
		t.Fatalf("detected: %s %s", ep, kind)
	}
	n.PublicIP = addr("198.51.100.22")
	if ep, _, _ := Endpoint(n, 32768); ep != "198.51.100.22:32768" {
		t.Fatalf("world public: %s", ep)
	}
	n.DeclaredIngress = addr("10.77.0.22")
	if ep, kind, _ := Endpoint(n, 32768); ep != "10.77.0.22:32768" || kind != api.AddressPrivate {
		t.Fatalf("declared: %s %s", ep, kind)
	}
	n.DeclaredIngress = addr("fd00::5")
	if ep, _, _ := Endpoint(n, 51820); ep != "[fd00::5]:51820" {
		t.Fatalf("v6: %s", ep)
	}
}

func TestAddressKind(t *testing.T) {
	for a, want := range map[string]string{
		"10.77.0.21": api.AddressPrivate, "192.168.1.2": api.AddressPrivate, "172.16.0.1": api.AddressPrivate,
		"100.64.1.1": api.AddressPrivate, "fd12::1": api.AddressPrivate, "169.254.1.1": api.AddressPrivate,
		"127.0.0.1": api.AddressPrivate, "198.51.100.21": api.AddressPublic, "8.8.8.8": api.AddressPublic,
		"2001:db8::1": api.AddressPublic, "::ffff:10.0.0.1": api.AddressPrivate,
	} {
		if got := model.AddressKind(addr(a)); got != want {
			t.Errorf("%s: %s, want %s", a, got, want)
		}
	}
}

func TestOneWireGuardServerPerCluster(t *testing.T) {
	if e := CheckAddService(ky3, nil); e != nil {
		t.Fatal(e)
	}
	e := CheckAddService(ky3, []model.Service{{ID: "wg-ky3", CID: "ky3", NodeID: "n1"}})
	wantErr(t, e, api.CodeRefused, "a cluster runs one user-VPN server", "wg-ky3 on n1",
		"runos services wireguard move wg-ky3 --cid ky3 --target-node-id <nid> --follow")
}

func TestNetBirdExcludesWireGuard(t *testing.T) {
	c := ky3
	c.UserVPN = api.UserVPNNetBird
	e := CheckAddService(c, nil)
	wantErr(t, e, api.CodeRefused, "NetBird", "mutually exclusive")
	if !strings.Contains(e.Hint, "turn the cluster's NetBird user VPN off first") {
		t.Errorf("hint %q says nothing to do instead", e.Hint)
	}
}

func TestGatewayRole(t *testing.T) {
	svc := model.Service{ID: "s", NodeID: "n1"}
	prep := &model.Move{State: api.MovePreparing, FromNodeID: "n1", TargetNodeID: "n2"}
	sw := &model.Move{State: api.MoveSwitching, FromNodeID: "n1", TargetNodeID: "n2"}
	moved := svc
	moved.NodeID = "n2"
	for _, c := range []struct {
		svc  model.Service
		mv   *model.Move
		nid  string
		want string
	}{
		{svc, nil, "n1", api.GatewayActive},
		{svc, nil, "n2", ""},
		{svc, prep, "n1", api.GatewayActive},
		{svc, prep, "n2", api.GatewayStandby},
		{moved, sw, "n2", api.GatewayActive},
		{moved, sw, "n1", api.GatewayDraining},
		{moved, nil, "n1", ""},
		{svc, prep, "n3", ""},
	} {
		if got := GatewayRole(c.svc, c.mv, c.nid); got != c.want {
			t.Errorf("%s with move %+v: %q, want %q", c.nid, c.mv, got, c.want)
		}
	}
}

func TestMovePlanWarnsPrivateToPublic(t *testing.T) {
	svc := model.Service{ID: "wg-ky3", CID: "ky3", NodeID: "n1", Port: 32768}
	n1 := cp("n1")
	n1.DeclaredIngress, n1.PublicIP = addr("10.77.0.21"), addr("198.51.100.21")
	n2 := worker("n2")
	n2.PublicIP = addr("198.51.100.22")
	plan, e := PlanMove(svc, n1, n2, now, Heartbeats{Timeout: hb}, ready)
	if e != nil {
		t.Fatal(e)
	}
	if plan.Endpoint != "198.51.100.22:32768" || plan.AddressKind != api.AddressPublic ||
		plan.PreviousEndpoint != "10.77.0.21:32768" || plan.PreviousAddressKind != api.AddressPrivate {
		t.Fatalf("plan = %+v", plan)
	}
	if len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "most routers will not route a public address back inside") ||
		!strings.Contains(plan.Warnings[0], "runos nodes ingress n2 --cid ky3 --ingress-ip <private-ip> --ingress-not-published") {
		t.Fatalf("warnings = %q", plan.Warnings)
	}
	// And back: public to private warns too, the other way.
	svc.NodeID = "n2"
	plan, _ = PlanMove(svc, n2, n1, now, Heartbeats{Timeout: hb}, ready)
	if plan.AddressKind != api.AddressPrivate || len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "a private address") {
		t.Fatalf("back: %+v", plan)
	}
	// Same kind: no warning.
	n3 := worker("n3")
	n3.PublicIP = addr("198.51.100.23")
	plan, _ = PlanMove(svc, n2, n3, now, Heartbeats{Timeout: hb}, ready)
	if len(plan.Warnings) != 0 {
		t.Fatalf("public to public warned: %q", plan.Warnings)
	}
}

func TestMovePlanRefusals(t *testing.T) {
	svc := model.Service{ID: "wg-ky3", CID: "ky3", NodeID: "n1", Port: 32768}
	n1 := cp("n1")
	n1.DeclaredIngress = addr("10.77.0.21")
	_, e := PlanMove(svc, n1, n1, now, Heartbeats{Timeout: hb}, ready)
	wantErr(t, e, api.CodeConflict, "already runs on n1")
	_, e = PlanMove(svc, n1, worker("n2"), now, Heartbeats{Timeout: hb}, ready)
	wantErr(t, e, api.CodeRefused, "devices would be given no address", "runos nodes ingress n2 --cid ky3 --ingress-ip <ip>")
	// A target without heartbeats is planned with a warning (the move itself fails).
	n2 := worker("n2")
	n2.DeclaredIngress, n2.LastHeartbeat = addr("10.77.0.22"), now.Add(-hb)
	plan, e := PlanMove(svc, n1, n2, now, Heartbeats{Timeout: hb}, ready)
	if e != nil || len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "no_heartbeat") {
		t.Fatalf("plan = %+v, %v", plan, e)
	}
}

func TestCheckStartMove(t *testing.T) {
	svc := model.Service{ID: "wg-ky3", CID: "ky3", NodeID: "n1", State: api.ServiceServing}
	if e := CheckStartMove(svc, nil); e != nil {
		t.Fatal(e)
	}
	wantErr(t, CheckStartMove(svc, &model.Move{ID: "mv1", State: api.MovePreparing}), api.CodeConflict, "already in flight", "mv1")
	svc.State = api.ServiceInstalling
	wantErr(t, CheckStartMove(svc, nil), api.CodeConflict, "not serving")
}

func TestWithholdingLastPublishedControlPlane(t *testing.T) {
	f := false
	n1 := cp("n1")
	n1.Published, n1.PublicIP = true, addr("198.51.100.21")
	n2 := worker("n2")
	n2.Published = true
	nodes := []model.Node{n1, n2}

	// Without a private ingress address: refused with the docs' reason.
	_, e := ApplyNodeIngress(ky3, nodes, n1, api.NodeIngressRequest{Published: &f})
	wantErr(t, e, api.CodeRefused, "the last DNS-published control plane",
		"allowed only together with a dialable private --ingress-ip",
		"the cluster would then keep no address anyone could dial",
		"runos nodes ingress n1 --cid ky3 --ingress-ip <lan-ip> --ingress-not-published")
	// A public ingress address is not enough.
	_, e = ApplyNodeIngress(ky3, nodes, n1, api.NodeIngressRequest{IngressIP: "198.51.100.50", Published: &f})
	wantErr(t, e, api.CodeRefused, "no address anyone could dial")
	// Together with a private one: allowed.
	got, e := ApplyNodeIngress(ky3, nodes, n1, api.NodeIngressRequest{IngressIP: "10.77.0.21", Published: &f})
	if e != nil || got.Published || got.DeclaredIngress != addr("10.77.0.21") {
		t.Fatalf("with private ingress: %+v, %v", got, e)
	}
	// A node that already keeps a private ingress address may be withheld alone.
	n1p := n1
	n1p.DeclaredIngress = addr("10.77.0.21")
	if _, e := ApplyNodeIngress(ky3, []model.Node{n1p, n2}, n1p, api.NodeIngressRequest{Published: &f}); e != nil {
		t.Fatal(e)
	}
	// Another published control plane: withholding this one is fine.
	n3 := cp("n3")
	n3.Published = true
	if _, e := ApplyNodeIngress(ky3, []model.Node{n1, n2, n3}, n1, api.NodeIngressRequest{Published: &f}); e != nil {
		t.Fatal(e)
	}
	// Workers are not the rule's concern.
	if _, e := ApplyNodeIngress(ky3, nodes, n2, api.NodeIngressRequest{Published: &f}); e != nil {
		t.Fatal(e)
	}
	// Bad addresses are invalid, not refused.
	_, e = ApplyNodeIngress(ky3, nodes, n1, api.NodeIngressRequest{IngressIP: "10.77.0"})
	wantErr(t, e, api.CodeInvalid, "is not an IP address")
	_, e = ApplyNodeIngress(ky3, nodes, n1, api.NodeIngressRequest{IngressIP: "127.0.0.1"})
	wantErr(t, e, api.CodeInvalid, "could dial")
}

func TestDNSRecordsFollowPublication(t *testing.T) {
	n1 := cp("n1")
	n1.Published, n1.DeclaredIngress, n1.PublicIP = true, addr("10.77.0.21"), addr("198.51.100.21")
	n2 := worker("n2")
	n2.Published, n2.PublicIP = true, addr("198.51.100.22")
	recs := DNSRecords(ky3, []model.Node{n1, n2})
	if len(recs) != 2 || recs[0].Name != "k8s.ky3.rjwrn.example.com" || strings.Join(recs[0].Values, ",") != "198.51.100.21" ||
		recs[1].Name != "*.ky3.rjwrn.example.com" || strings.Join(recs[1].Values, ",") != "198.51.100.21,198.51.100.22" {
		t.Fatalf("records = %+v", recs)
	}
	// Withheld: the k8s record goes; re-publishing rebuilds it.
	n1.Published = false
	recs = DNSRecords(ky3, []model.Node{n1, n2})
	if len(recs) != 1 || recs[0].Name != "*.ky3.rjwrn.example.com" {
		t.Fatalf("withheld: %+v", recs)
	}
	n1.Published = true
	if recs = DNSRecords(ky3, []model.Node{n1, n2}); len(recs) != 2 {
		t.Fatalf("republished: %+v", recs)
	}
	n2.PublicIP = addr("2001:db8::22")
	recs = DNSRecords(ky3, []model.Node{n1, n2})
	if len(recs) != 3 || recs[2].Type != "AAAA" {
		t.Fatalf("v6: %+v", recs)
	}
}

func TestDeleteNodeRules(t *testing.T) {
	n1, n2 := cp("n1"), worker("n2")
	nodes := []model.Node{n1, n2}
	svcs := []model.Service{{ID: "wg-ky3", CID: "ky3", NodeID: "n1"}}
	e := CheckDeleteNode(ky3, nodes, svcs, nil, n1, true)
	wantErr(t, e, api.CodeRefused, "a node that hosts the VPN server refuses deletion; move the server off it first",
		"runos services wireguard move wg-ky3 --cid ky3 --target-node-id n2 --follow")
	// Last control plane: refused unless the cluster is reset.
	e = CheckDeleteNode(ky3, nodes, nil, nil, n1, false)
	wantErr(t, e, api.CodeRefused, "you cannot remove the last control-plane node normally", "--reset-cluster", "irreversible")
	if e := CheckDeleteNode(ky3, nodes, nil, nil, n1, true); e != nil {
		t.Fatal(e)
	}
	if e := CheckDeleteNode(ky3, nodes, svcs, nil, n2, false); e != nil {
		t.Fatal(e)
	}
	// The target of a move in flight.
	e = CheckDeleteNode(ky3, nodes, svcs, []model.Move{{ID: "mv1", ServiceID: "wg-ky3", FromNodeID: "n1", TargetNodeID: "n2", State: api.MovePreparing}}, n2, false)
	wantErr(t, e, api.CodeConflict, "mv1")
	// With more than two other nodes the move command leaves the target to the operator.
	e = CheckDeleteNode(ky3, []model.Node{n1, n2, worker("n3")}, svcs, nil, n1, false)
	wantErr(t, e, api.CodeRefused, "--target-node-id <nid> --follow")
}

func TestDeletePreflightWarnsOnEvenEtcd(t *testing.T) {
	three := []model.Node{cp("n1"), cp("n2"), cp("n3"), worker("n4")}
	p := DeletePreflight(ky3, three, nil, nil, three[0], false)
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "even") || len(p.Refusals) != 0 {
		t.Fatalf("3 → 2: %+v", p)
	}
	p = DeletePreflight(ky3, three, nil, nil, three[3], false)
	if len(p.Warnings) != 0 {
		t.Fatalf("worker removal warned: %+v", p)
	}
	two := []model.Node{cp("n1"), cp("n2")}
	if p = DeletePreflight(ky3, two, nil, nil, two[0], false); len(p.Warnings) != 0 {
		t.Fatalf("2 → 1 warned: %+v", p)
	}
	// The preflight reports what DELETE would refuse, and still only warns.
	one := []model.Node{cp("n1"), worker("n2")}
	p = DeletePreflight(ky3, one, nil, nil, one[0], false)
	if len(p.Refusals) != 1 || !strings.Contains(p.Refusals[0], "last control-plane node") {
		t.Fatalf("last cp: %+v", p)
	}
}

// TestHeartbeatsCountControlsOwnOutage: a node heard from before control
// came up is ready until a full window after control's start; one never
// heard from is no_heartbeat; one heard since counts from its own report.
func TestHeartbeatsCountControlsOwnOutage(t *testing.T) {
	up := now.Add(-10 * time.Second) // control came up 10 s ago, after 45 s down
	h := Heartbeats{Timeout: hb, Since: up}
	n := worker("n2")
	n.LastHeartbeat = up.Add(-45 * time.Second)
	if got := h.Status(n, now); got != api.NodeReady || !h.Unheard(n) {
		t.Errorf("10 s after control's start: %s (unheard %v), want ready", got, h.Unheard(n))
	}
	if got := h.Status(n, up.Add(hb)); got != api.NodeNoHeartbeat {
		t.Errorf("a full window after control's start: %s", got)
	}
	if got := (Heartbeats{Timeout: hb}).Status(n, now); got != api.NodeNoHeartbeat {
		t.Errorf("without the grace: %s", got)
	}
	never := worker("n3")
	never.LastHeartbeat = time.Time{}
	if got := h.Status(never, now); got != api.NodeNoHeartbeat {
		t.Errorf("never heard from: %s", got)
	}
	n.LastHeartbeat = now.Add(-time.Second)
	if got := h.Status(n, now.Add(hb)); got != api.NodeNoHeartbeat || h.Unheard(n) {
		t.Errorf("heard since the start, then silent a window: %s", got)
	}
	// The move's plan uses the same rule: no warning within the grace.
	svc := model.Service{ID: "wg-ky3", CID: "ky3", NodeID: "n1", Port: 32768}
	n1 := worker("n1")
	n1.DeclaredIngress = addr("10.77.0.21")
	n.LastHeartbeat = up.Add(-45 * time.Second)
	n.DeclaredIngress = addr("10.77.0.22")
	if plan, e := PlanMove(svc, n1, n, now, h, ready); e != nil || len(plan.Warnings) != 0 {
		t.Errorf("plan within the grace: %+v %v", plan, e)
	}
}
