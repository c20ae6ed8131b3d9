package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

func TestAddService(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	before := e.version()
	_, err := e.op.AddVPNService(ctx, "ky3", api.AddVPNServiceRequest{Name: "second", TargetNodeID: "n2"})
	ae := wantCode(t, err, 409, api.CodeRefused)
	if !strings.Contains(ae.Message, "a cluster runs one user-VPN server") {
		t.Fatalf("message = %q", ae.Message)
	}
	_, err = e.op.AddVPNService(ctx, "nb1", api.AddVPNServiceRequest{Name: "wg", TargetNodeID: "n1"})
	ae = wantCode(t, err, 409, api.CodeRefused)
	if !strings.Contains(ae.Message, "mutually exclusive") {
		t.Fatalf("message = %q", ae.Message)
	}
	_, err = e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "wg", TargetNodeID: "n7"})
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{TargetNodeID: "n1"})
	wantCode(t, err, 400, api.CodeInvalid)
	if e.version() != before {
		t.Fatal("a refused add changed something")
	}
	bob := e.signIn("bob@example.com")
	before = e.version() // bob's sign-in is a change
	_, err = bob.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "wg", TargetNodeID: "n1"})
	wantCode(t, err, 403, api.CodeForbidden)
	if e.version() != before {
		t.Fatal("a refused add changed something")
	}

	svc, err := e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "wg", TargetNodeID: "n1"})
	if err != nil || svc.State != api.ServiceInstalling || svc.Port != api.DefaultVPNPort || svc.Subnet != "100.100.3.0/24" ||
		svc.Endpoint != "10.77.0.61:32768" || svc.AddressKind != api.AddressPrivate || svc.Version == 0 {
		t.Fatalf("added = %+v, %v", svc, err)
	}
	if c, _ := e.op.Cluster(ctx, "abc"); c.UserVPN != api.UserVPNWireGuard || len(c.VPNServices) != 1 {
		t.Fatalf("cluster after add = %+v", c)
	}
	// --follow: the service long-poll answers when the gateway serves.
	follow := poll(func() (*api.VPNService, error) { return e.op.VPNService(ctx, "abc", svc.ID, svc.Version, time.Minute) })
	e.waitWatchers(1)
	k := newKey(t)
	m := e.serve("abc", "n1", k)
	if m.Serve.Role != api.GatewayActive || m.Serve.ServiceID != svc.ID {
		t.Fatalf("gateway map = %+v", m.Serve)
	}
	got, err := recv(t, follow)
	if err != nil || got.State != api.ServiceServing || got.PublicKey != k.PublicKey().String() {
		t.Fatalf("followed = %+v, %v", got, err)
	}
	_, err = e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "again", TargetNodeID: "n2"})
	wantCode(t, err, 409, api.CodeRefused)
}

func TestAddServiceFailsWithoutGateway(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	svc, err := e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "wg", TargetNodeID: "n2", Port: 51820})
	if err != nil || svc.Port != 51820 || svc.Endpoint != "198.51.100.62:51820" {
		t.Fatalf("added = %+v, %v", svc, err)
	}
	e.clk.Advance(15 * time.Second)
	got, _ := e.op.VPNService(ctx, "abc", svc.ID, 0, 0)
	if got.State != api.ServiceFailed || !strings.Contains(got.Error, "did not bring the server up within 15s") {
		t.Fatalf("after 15 s: %+v", got)
	}
	// The gateway's own error is shown; a later success still serves.
	_ = e.gateway("abc", "n2").GatewayReport(ctx, api.GatewayReport{ServiceID: svc.ID, Error: "bind udp :51820: address in use"})
	if got, _ = e.op.VPNService(ctx, "abc", svc.ID, 0, 0); !strings.Contains(got.Error, "address in use") {
		t.Fatalf("error = %q", got.Error)
	}
	e.serve("abc", "n2", newKey(t))
	if got, _ = e.op.VPNService(ctx, "abc", svc.ID, 0, 0); got.State != api.ServiceServing || got.Error != "" {
		t.Fatalf("after serving: %+v", got)
	}
}

func TestHeartbeatsAndDetectedAddress(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n, _ := e.op.Node(ctx, "ky3", "n3")
	if n.Status != api.NodeNoHeartbeat || n.IngressIP != "" {
		t.Fatalf("n3 before any report = %+v", n)
	}
	// A report from 198.51.100.23 (what control sees) becomes n3's public address.
	body := `{"publicKey":"` + newKey(t).PublicKey().String() + `","version":"1.0","listening":false,"mapVersion":0}`
	req := httptest.NewRequest(http.MethodPost, "/v1/gateway/report", strings.NewReader(body))
	req.RemoteAddr = "198.51.100.23:40000"
	req.Header.Set("Authorization", "Bearer "+enroll("ky3", "n3"))
	rec := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("report: %d %s", rec.Code, rec.Body)
	}
	n, _ = e.op.Node(ctx, "ky3", "n3")
	if n.Status != api.NodeReady || n.IngressIP != "198.51.100.23" || n.PublicIP != "198.51.100.23" || !n.LastHeartbeat.Equal(t0) {
		t.Fatalf("n3 after a report = %+v", n)
	}
	// The world file's address wins over the detected one.
	e.heartbeat("ky3", "n2")
	if n2, _ := e.op.Node(ctx, "ky3", "n2"); n2.IngressIP != "198.51.100.22" {
		t.Fatalf("n2 = %+v", n2)
	}
	e.clk.Advance(29 * time.Second)
	if n, _ = e.op.Node(ctx, "ky3", "n3"); n.Status != api.NodeReady {
		t.Fatalf("after 29 s: %s", n.Status)
	}
	e.clk.Advance(time.Second)
	if n, _ = e.op.Node(ctx, "ky3", "n3"); n.Status != api.NodeNoHeartbeat {
		t.Fatalf("after 30 s: %s", n.Status)
	}
	// Bad reports change nothing.
	before := e.version()
	for _, body := range []string{`{"publicKey":"nope"}`, `{"listening":true}`, `{"handshakes":[{"publicKey":"x"}]}`, `{"listenPort":70000}`, `{"extra":1}`} {
		if status, code := e.raw(enroll("ky3", "n1"), http.MethodPost, "/v1/gateway/report", body); status != 400 || code != api.CodeInvalid {
			t.Errorf("%s: %d %s", body, status, code)
		}
	}
	if e.version() != before {
		t.Fatal("a bad report changed something")
	}
}

func TestNodeIngressRules(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f, tr := false, true
	d := e.newDevice("ada@example.com", "laptop")
	_, _ = d.c.JoinCluster(ctx, d.dev.ID, "xym")

	// xym's n1 is its last published control plane and has no private ingress.
	before := e.version()
	_, err := e.op.SetNodeIngress(ctx, "xym", "n1", api.NodeIngressRequest{Published: &f})
	ae := wantCode(t, err, 409, api.CodeRefused)
	if !strings.Contains(ae.Message, "the cluster would then keep no address anyone could dial") {
		t.Fatalf("message = %q", ae.Message)
	}
	_, err = e.op.SetNodeIngress(ctx, "xym", "n1", api.NodeIngressRequest{IngressIP: "999.1.1.1"})
	wantCode(t, err, 400, api.CodeInvalid)
	if e.version() != before {
		t.Fatal("a refusal changed something")
	}
	detail, _ := e.op.Cluster(ctx, "xym")
	if len(detail.DNSRecords) != 2 || detail.DNSRecords[0].Name != "k8s.xym.rjwrn.example.com" || detail.DNSRecords[0].Values[0] != "198.51.100.31" {
		t.Fatalf("records = %+v", detail.DNSRecords)
	}
	dm, _ := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)

	// Together with a dialable private ingress address it is allowed, and
	// devices are told the new endpoint.
	n, err := e.op.SetNodeIngress(ctx, "xym", "n1", api.NodeIngressRequest{IngressIP: "10.77.0.31", Published: &f})
	if err != nil || n.Published || n.IngressIP != "10.77.0.31" || n.DeclaredIngressIP != "10.77.0.31" || n.PublicIP != "198.51.100.31" {
		t.Fatalf("withheld = %+v, %v", n, err)
	}
	if detail, _ = e.op.Cluster(ctx, "xym"); len(detail.DNSRecords) != 0 {
		t.Fatalf("records after withholding = %+v", detail.DNSRecords)
	}
	dm2, _ := d.c.DeviceMap(ctx, d.dev.ID, dm.Version, time.Minute)
	if dm2.Version <= dm.Version || dm2.Clusters[0].VPN.Endpoint != "10.77.0.31:32768" {
		t.Fatalf("device map after the ingress change = %+v", dm2.Clusters)
	}
	// Re-publishing rebuilds the records.
	if _, err := e.op.SetNodeIngress(ctx, "xym", "n1", api.NodeIngressRequest{Published: &tr}); err != nil {
		t.Fatal(err)
	}
	if detail, _ = e.op.Cluster(ctx, "xym"); len(detail.DNSRecords) != 2 {
		t.Fatalf("records after re-publishing = %+v", detail.DNSRecords)
	}
	_, err = e.signIn("bob@example.com").SetNodeIngress(ctx, "xym", "n1", api.NodeIngressRequest{Published: &f})
	wantCode(t, err, 403, api.CodeForbidden)
}

func TestDeleteNode(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	before := e.version()
	err := e.op.DeleteNode(ctx, "ky3", "n1", true)
	ae := wantCode(t, err, 409, api.CodeRefused)
	if !strings.Contains(ae.Message, "move the server off it first") || ae.Hint != "runos services wireguard move wg-ky3 --cid ky3 --target-node-id <nid> --follow" {
		t.Fatalf("refusal = %q / %q", ae.Message, ae.Hint)
	}
	err = e.op.DeleteNode(ctx, "abc", "n1", false)
	ae = wantCode(t, err, 409, api.CodeRefused)
	if !strings.Contains(ae.Message, "last control-plane node") || !strings.Contains(ae.Message, "--reset-cluster") {
		t.Fatalf("refusal = %q", ae.Message)
	}
	if e.version() != before {
		t.Fatal("a refused delete changed something")
	}
	p, err := e.op.DeletePreflight(ctx, "ky3", "n1")
	if err != nil || len(p.Refusals) != 1 || len(p.Warnings) != 0 {
		t.Fatalf("preflight = %+v, %v", p, err)
	}
	// Deleting a worker works; its gateway's token is void afterwards.
	if err := e.op.DeleteNode(ctx, "ky3", "n3", false); err != nil {
		t.Fatal(err)
	}
	_, err = e.op.Node(ctx, "ky3", "n3")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = e.gateway("ky3", "n3").GatewayMap(ctx, 0, 0)
	wantCode(t, err, 401, api.CodeUnauthorized)
	// The last control plane goes with --reset-cluster.
	if err := e.op.DeleteNode(ctx, "abc", "n1", true); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.op.Cluster(ctx, "abc"); c.IsConfigured || len(c.Nodes) != 1 {
		t.Fatalf("abc after reset = %+v", c)
	}
}

// A service's install timeout survives a restart of control, as a move's
// timers do: a service whose gateway never came up does not stay
// installing forever.
func TestInstallTimeoutSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	svc, err := e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "wg", TargetNodeID: "n1"})
	if err != nil || svc.State != api.ServiceInstalling {
		t.Fatalf("add = %+v, %v", svc, err)
	}
	e.clk.Advance(10 * time.Second)
	// A second server on the same store (a restart) re-arms the install
	// timeout, from when the service was added.
	e.srv.Close()
	srv2, err := New(Config{Store: e.st, Hub: e.hub, Clock: e.clk, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	e.clk.Advance(5 * time.Second)
	got, err := e.op.VPNService(ctx, "abc", svc.ID, 0, 0)
	if err != nil || got.State != api.ServiceFailed || !strings.Contains(got.Error, "did not bring the server up within 15s") {
		t.Fatalf("service 15 s after it was added, across a restart: %+v, %v", got, err)
	}
}
