package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// operatorHarness is a harness with RUNOS_TOKEN set to a valid operator token.
func operatorHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.control.addToken("optoken", "ops@example.com", true)
	h.env["RUNOS_TOKEN"] = "optoken"
	return h
}

func TestOperatorVerbsNeedAToken(t *testing.T) {
	h := newHarness(t)
	h.run("clusters", "list").want(t, 1, nil, []string{"list clusters: not logged in: run `runos login` (or set RUNOS_TOKEN to an operator token)"})
	h.env["RUNOS_TOKEN"] = "wrong"
	h.run("clusters", "list").want(t, 1, nil, []string{"list clusters: control does not accept the token in RUNOS_TOKEN: unknown token"})
}

func TestLoginStoresTokenAndLogoutEndsIt(t *testing.T) {
	h := newHarness(t)
	h.run("login").want(t, 0, []string{"Logged in to " + h.control.URL() + " as alice@example.com until 2026-12-03 12:00 UTC."}, nil)
	if _, ok := h.ks.m[operatorAccount]; !ok {
		t.Fatal("login stored no token")
	}
	if strings.Contains(h.ks.m[operatorAccount], "password") {
		t.Fatal("odd credential")
	}
	h.run("clusters", "list").want(t, 0, []string{"CID  NAME     ISCONFIGURED", "ky3  tc3-ky3  true", "xym  tc2-xym  false"}, nil)

	h.run("logout").want(t, 0, []string{"Logged out of " + h.control.URL()}, nil)
	if !slices.Contains(h.control.Requests(), "DELETE /v1/sessions/current") {
		t.Errorf("logout did not end the session: %q", h.control.Requests())
	}
	h.run("clusters", "list").want(t, 1, nil, []string{"not logged in: run `runos login`"})
	h.run("logout").want(t, 0, []string{"Not logged in."}, nil)
}

func TestLoginJSONHasNoToken(t *testing.T) {
	h := newHarness(t)
	r := h.run("login", "--no-browser", "--json")
	r.want(t, 0, []string{`"user": "alice@example.com"`, `"operator": true`}, []string{"enter the code"})
	if strings.Contains(r.stdout, "tok1") {
		t.Errorf("login --json printed the token: %s", r.stdout)
	}
}

func TestExpiredOperatorSignIn(t *testing.T) {
	h := newHarness(t)
	h.run("login").want(t, 0, nil, nil)
	h.now = h.now.Add(25 * time.Hour) // the stored expiry has passed
	h.run("nodes", "list", "--cid", "ky3").want(t, 1, nil, []string{"your operator sign-in expired at 12:00 UTC: run `runos login`"})
	h.now = h.now.Add(-25 * time.Hour)
	h.control.expired["tok1"] = true // control says the session lapsed
	h.run("nodes", "list", "--cid", "ky3").want(t, 1, nil, []string{"list nodes of ky3: your operator sign-in expired: run `runos login`"})
}

func TestClustersListJSON(t *testing.T) {
	h := operatorHarness(t)
	r := h.run("clusters", "list", "--json")
	r.want(t, 0, nil, nil)
	var cs []api.Cluster
	if err := json.Unmarshal([]byte(r.stdout), &cs); err != nil || len(cs) != 2 || cs[0].CID != "ky3" || !cs[0].IsConfigured {
		t.Errorf("clusters --json: %v %s", err, r.stdout)
	}
}

func TestClustersShow(t *testing.T) {
	h := operatorHarness(t)
	h.control.services["wg-ky3"] = &api.VPNService{ID: "wg-ky3", CID: "ky3", Name: "vpn", NodeID: "n1", Port: 32768, State: api.ServiceServing,
		Endpoint: "10.77.0.21:32768", AddressKind: api.AddressPrivate, Address: "100.100.1.1", Devices: 2}
	h.control.clusters[0].VPNServices = []api.VPNService{*h.control.services["wg-ky3"]}
	h.control.clusters[0].Inside = &api.ClusterInside{ServiceRange: "10.96.0.0/12", DNSServer: "10.96.0.10", Mapped: "fd52:4f53:5600:2::/96"}
	h.run("clusters", "show", "ky3").want(t, 0, []string{
		"  Service range  10.96.0.0/12",
		"  Cluster DNS    10.96.0.10",
		"  Pod range      -",
		"  Mapped range   fd52:4f53:5600:2::/96",
		"Cluster       ky3 (tc3-ky3), account rjwrn",
		"Domain        ky3.rjwrn.example.com",
		"k8s.ky3.rjwrn.example.com  A     198.51.100.21",
		"*.ky3.rjwrn.example.com    A     198.51.100.21",
		"n1   ky3-n1  control-plane,worker  ready   10.77.0.21     true       true",
		"wg-ky3  vpn   n1    32768  serving  10.77.0.21:32768 (private)  100.100.1.1  2",
	}, nil)
	h.run("clusters", "show", "xym").want(t, 0, []string{"runos services wireguard add --cid xym", "  nothing declared (runos-gateway's"}, nil)
	h.run("clusters", "show", "zzz").want(t, 1, nil, []string{"show cluster zzz: no cluster zzz (see runos clusters list)"})
	r := h.run("clusters", "show", "ky3", "--json")
	var d api.ClusterDetail
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || len(d.DNSRecords) != 2 || len(d.Nodes) != 2 {
		t.Errorf("show --json: %v %s", err, r.stdout)
	}
}

func TestNodes(t *testing.T) {
	h := operatorHarness(t)
	h.run("config", "set", "cid", "ky3").want(t, 0, nil, nil)
	h.run("nodes", "list").want(t, 0, []string{
		"NID  NAME    ROLES                 STATUS  INGRESSIP      PUBLISHED  VPN",
		"n1   ky3-n1  control-plane,worker  ready   10.77.0.21     true       true",
		"n2   ky3-n2  worker                ready   198.51.100.22  true       false",
	}, nil)
	h.run("nodes", "show", "n2").want(t, 0, []string{"Ingress address    198.51.100.22 (detected public address; no ingress address declared)"}, nil)
	h.run("nodes", "show", "n9").want(t, 1, nil, []string{"show node n9 of ky3: no node n9 in ky3"})

	// Ingress: checked locally first.
	before := len(h.control.Requests())
	h.run("nodes", "ingress", "n2", "--ingress-ip", "10.77.0.300").want(t, 2, nil, []string{`--ingress-ip "10.77.0.300": not an IP address`})
	h.run("nodes", "ingress", "n2", "--ingress-ip", "fe80::1%eth0").want(t, 2, nil, []string{"not an IP address"})
	if len(h.control.Requests()) != before {
		t.Errorf("a bad ingress IP reached control: %q", h.control.Requests()[before:])
	}
	r := h.run("nodes", "ingress", "n2", "--ingress-ip", "10.77.0.22", "--ingress-not-published", "--json")
	var n api.Node
	if err := json.Unmarshal([]byte(r.stdout), &n); err != nil || n.IngressIP != "10.77.0.22" || n.Published {
		t.Errorf("ingress --json: %v %s", err, r.stdout)
	}
	h.run("nodes", "ingress", "n2", "--ingress-published").want(t, 0, []string{"Published          true"}, nil)

	// A refusal exits non-zero with control's message and hint.
	h.run("nodes", "delete", "n1").want(t, 1, nil, []string{
		"delete node n1 of ky3: node n1 hosts the VPN server and refuses deletion (move the server off it first: runos services wireguard move <id> --cid ky3 --target-node-id <nid>)",
	})
	h.run("nodes", "delete", "n2").want(t, 0, []string{"Deleted node n2 of ky3."}, nil)
	h.run("nodes", "delete", "n2", "--json").want(t, 0, []string{`"deleted": true`, `"nid": "n2"`}, nil)
	h.control.refuse["DELETE /v1/clusters/ky3/nodes/n2"] = &api.Error{Status: 409, Code: api.CodeRefused,
		Message: "n2 is the last control-plane node", Hint: "pass --reset-cluster to reset the cluster (irreversible)"}
	h.run("nodes", "delete", "n2").want(t, 1, nil, []string{"n2 is the last control-plane node (pass --reset-cluster"})
	h.run("nodes", "delete-preflight", "n2").want(t, 0, []string{"warning: removing n2 leaves etcd on an even voting-member count (2)", "can be deleted"}, nil)
	r = h.run("nodes", "delete-preflight", "n2", "--json")
	r.want(t, 0, []string{`"refusals": []`}, nil)
}

func TestNodesNeedACluster(t *testing.T) {
	h := operatorHarness(t)
	h.run("nodes", "list").want(t, 2, nil, []string{"no cluster given: pass --cid <cid> or set a default with `runos config set cid <cid>`"})
}

func TestServicesAddFollow(t *testing.T) {
	h := operatorHarness(t)
	h.control.servicePlan = []func(*api.VPNService){
		func(s *api.VPNService) {}, // a poll that times out unchanged
		func(s *api.VPNService) { s.PublicKey = "gwkey=" },
		func(s *api.VPNService) {
			s.State, s.Endpoint, s.AddressKind = api.ServiceServing, "10.77.0.21:32768", api.AddressPrivate
		},
	}
	h.run("services", "wireguard", "add", "--cid", "ky3", "--target-node-id", "n1", "--name", "vpn", "--follow").want(t, 0, []string{
		"Added service wg-ky3 (vpn) of ky3 on node n1, UDP 32768.",
		"  asked the gateway on n1 to bring the server up",
		"  gateway up on n1, key reported: gwkey=",
		"  listening on UDP 32768: devices dial 10.77.0.21:32768 (private)",
		"Serving: devices that connect to ky3 dial 10.77.0.21:32768.",
	}, nil)
}

func TestServicesAddFollowFailure(t *testing.T) {
	h := operatorHarness(t)
	h.control.servicePlan = []func(*api.VPNService){
		func(s *api.VPNService) {
			s.State, s.Error = api.ServiceFailed, "gateway on n1 did not report listening within 15s"
		},
	}
	h.run("services", "wireguard", "add", "--cid", "ky3", "--target-node-id", "n1", "--name", "vpn", "--follow").want(t, 1, nil,
		[]string{"service wg-ky3 failed: gateway on n1 did not report listening within 15s"})
}

func TestServicesAddRefused(t *testing.T) {
	h := operatorHarness(t)
	h.control.refuse["POST /v1/clusters/ky3/services/wireguard"] = &api.Error{Status: 409, Code: api.CodeRefused,
		Message: "cluster ky3 already runs a WireGuard server (wg-ky3)", Hint: "a cluster runs one user-VPN server: move it with runos services wireguard move"}
	h.run("services", "wireguard", "add", "--cid", "ky3", "--target-node-id", "n2", "--name", "vpn2").want(t, 1, nil,
		[]string{"add the WireGuard server of ky3: cluster ky3 already runs a WireGuard server (wg-ky3) (a cluster runs one user-VPN server"})
	h.run("services", "wireguard", "add", "--cid", "ky3", "--target-node-id", "n2", "--name", "v", "--port", "70000").want(t, 2, nil, []string{"--port 70000"})
}

func TestServicesListShow(t *testing.T) {
	h := operatorHarness(t)
	h.run("services", "wireguard", "list", "--cid", "ky3").want(t, 0, []string{"No WireGuard server in ky3"}, nil)
	h.control.services["wg-ky3"] = &api.VPNService{ID: "wg-ky3", CID: "ky3", Name: "vpn", NodeID: "n1", Port: 32768, State: api.ServiceServing,
		Endpoint: "10.77.0.21:32768", AddressKind: api.AddressPrivate, Subnet: "100.100.1.0/24", Address: "100.100.1.1", Devices: 3, PublicKey: "gw="}
	h.run("services", "wireguard", "list", "--cid", "ky3").want(t, 0, []string{"ID      NAME  NODE  PORT   STATE    ENDPOINT                    ADDRESS      DEVICES", "wg-ky3  vpn   n1    32768  serving  10.77.0.21:32768 (private)  100.100.1.1  3"}, nil)
	h.run("services", "wireguard", "show", "wg-ky3", "--cid", "ky3").want(t, 0, []string{
		"Node               n1", "Port               UDP 32768", "Devices dial       10.77.0.21:32768 (private)", "Devices            3 connected",
	}, nil)
	r := h.run("services", "wireguard", "show", "wg-ky3", "--cid", "ky3", "--json")
	var s api.VPNService
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Devices != 3 || s.Endpoint != "10.77.0.21:32768" {
		t.Errorf("show --json: %v %s", err, r.stdout)
	}
}

func stageMove(h *harness) {
	h.control.services["wg-ky3"] = &api.VPNService{ID: "wg-ky3", CID: "ky3", Name: "vpn", NodeID: "n1", Port: 32768, State: api.ServiceServing}
	h.control.plan = api.MovePlan{FromNodeID: "n1", TargetNodeID: "n2", Endpoint: "198.51.100.22:32768", AddressKind: api.AddressPublic,
		PreviousEndpoint: "10.77.0.21:32768", PreviousAddressKind: api.AddressPrivate,
		Warnings: []string{"the address devices are given changes from private to public: machines on your own network will usually lose the tunnel, because most routers will not route a public address back inside"}}
}

func TestServicesMoveFollow(t *testing.T) {
	h := operatorHarness(t)
	stageMove(h)
	t0 := time.Unix(1000, 0).UTC()
	h.control.movePlan = []func(*api.Move){
		func(m *api.Move) {
			m.State, m.Devices = api.MoveSwitching, api.MoveDevices{Total: 2}
			// Control records the plan's warning among the steps too.
			m.Steps = append(m.Steps, api.MoveStep{At: t0, Text: "warning: " + h.control.plan.Warnings[0]},
				api.MoveStep{At: t0.Add(120 * time.Millisecond), Text: "n2 listening; devices told"})
		},
		func(m *api.Move) { m.Devices.Switched = 1 },
		func(m *api.Move) {
			m.State, m.Devices.Switched, m.SwitchMs = api.MoveDone, 2, 412
			m.Steps = append(m.Steps, api.MoveStep{At: t0.Add(412 * time.Millisecond), Text: "every device switched; n1 stops serving"})
		},
	}
	r := h.run("services", "wireguard", "move", "wg-ky3", "--cid", "ky3", "--target-node-id", "n2", "--follow")
	r.want(t, 0, []string{
		"Devices will be given 198.51.100.22:32768 (public), instead of 10.77.0.21:32768 (private).",
		"warning: the address devices are given changes from private to public",
		"Moving wg-ky3 from n1 to n2 (move mv1).",
		"+0.000s  asked n2 to bring the server up",
		"+0.120s  n2 listening; devices told",
		"devices switched 0/2",
		"devices switched 1/2",
		"Done: 2/2 devices switched; 412 ms from the command to the last device's handshake (412 ms after control took the move).",
	}, nil)
	if n := strings.Count(r.stdout, "warning: "); n != 1 {
		t.Errorf("the warning printed %d times, want once (before the move):\n%s", n, r)
	}
	// The plan comes before the move starts.
	reqs := h.control.Requests()
	if i, j := slices.Index(reqs, "POST /v1/clusters/ky3/services/wireguard/wg-ky3/move-plan"), slices.Index(reqs, "POST /v1/clusters/ky3/services/wireguard/wg-ky3/moves"); i < 0 || j < i {
		t.Errorf("requests %q: want the plan before the move", reqs)
	}
}

func TestServicesMoveJSON(t *testing.T) {
	h := operatorHarness(t)
	stageMove(h)
	h.control.movePlan = []func(*api.Move){
		func(m *api.Move) {
			m.State, m.Devices, m.SwitchMs = api.MoveDone, api.MoveDevices{Total: 1, Switched: 1}, 180
		},
	}
	// The command spends 25 ms before it asks control to move: switchMs
	// counts it, controlSwitchMs is control's own figure.
	h.control.onPlan = func() { h.now = h.now.Add(25 * time.Millisecond) }
	r := h.run("services", "wireguard", "move", "wg-ky3", "--cid", "ky3", "--target-node-id", "n2", "--follow", "--json")
	r.want(t, 0, nil, []string{"Devices will be given", "Done: 1/1 devices switched; 205 ms from the command to the last device's handshake (180 ms after control took the move)"})
	var got struct {
		Warnings    []string        `json:"warnings"`
		Endpoint    string          `json:"endpoint"`
		AddressKind string          `json:"addressKind"`
		Devices     api.MoveDevices `json:"devices"`
		SwitchMs    int64           `json:"switchMs"`
		ControlMs   int64           `json:"controlSwitchMs"`
		State       string          `json:"state"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("move --json: %v\n%s", err, r.stdout)
	}
	if len(got.Warnings) != 1 || got.Endpoint != "198.51.100.22:32768" || got.AddressKind != "public" ||
		got.Devices != (api.MoveDevices{Total: 1, Switched: 1}) || got.SwitchMs != 205 || got.ControlMs != 180 || got.State != "done" {
		t.Errorf("move --json: %+v", got)
	}
}

func TestServicesMoveFailed(t *testing.T) {
	h := operatorHarness(t)
	stageMove(h)
	h.control.movePlan = []func(*api.Move){
		func(m *api.Move) {
			m.State, m.Error = api.MoveFailed, "the gateway on n2 did not report listening within 15s"
		},
	}
	h.run("services", "wireguard", "move", "wg-ky3", "--cid", "ky3", "--target-node-id", "n2", "--follow").want(t, 1, nil,
		[]string{"move service wg-ky3 of ky3 to n2: failed: the gateway on n2 did not report listening within 15s; devices were not changed"})
}

func TestServicesMoveRefusedBeforeAnythingMoves(t *testing.T) {
	h := operatorHarness(t)
	stageMove(h)
	h.control.refuse["POST /v1/clusters/ky3/services/wireguard/wg-ky3/move-plan"] = &api.Error{Status: 503, Code: api.CodeUnavailable,
		Message: "node n2 is no_heartbeat", Hint: "start its gateway or pick another node"}
	h.run("services", "wireguard", "move", "wg-ky3", "--cid", "ky3", "--target-node-id", "n2").want(t, 1, nil, []string{"node n2 is no_heartbeat (start its gateway or pick another node)"})
	if slices.Contains(h.control.Requests(), "POST /v1/clusters/ky3/services/wireguard/wg-ky3/moves") {
		t.Error("the move started after the plan was refused")
	}
}

// TestOperatorVerbsWordControlGoingAway: no raw transport error from an
// operator verb: control unreachable says nothing was changed; control
// going away mid-change says it may have taken effect and how to check.
func TestOperatorVerbsWordControlGoingAway(t *testing.T) {
	h := operatorHarness(t)
	h.run("config", "set", "cid", "ky3").want(t, 0, nil, nil)
	h.control.mu.Lock()
	h.control.drop["DELETE /v1/clusters/ky3/nodes/n2"] = true
	h.control.drop["GET /v1/clusters/ky3/nodes"] = true
	h.control.mu.Unlock()
	u := h.control.URL()
	r := h.run("nodes", "delete", "n2")
	r.want(t, 1, nil, []string{"delete node n2 of ky3: control " + u + " stopped answering before saying whether it was done (EOF); " +
		"it may have taken effect: check with `runos nodes list --cid ky3` before trying again"})
	h.run("nodes", "list").want(t, 1, nil, []string{"list nodes of ky3: control " + u + " stopped answering (EOF): try again"})
	// Nothing listens: the request never left.
	h.control.srv.Close()
	r = h.run("nodes", "ingress", "n2", "--ingress-ip", "10.77.0.22")
	r.want(t, 1, nil, []string{"set the ingress of node n2 of ky3: control " + u + " unreachable (", "nothing was changed: check the network"})
	for _, raw := range []string{`Post "`, `Get "`, `Delete "`, `Patch "`, `Put "`} {
		if strings.Contains(r.stderr, raw) {
			t.Errorf("raw transport error: %s", r.stderr)
		}
	}
}
