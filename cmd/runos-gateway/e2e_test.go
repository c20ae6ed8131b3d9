//go:build linux

package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/netnstest"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// gatewayBin is the runos-gateway binary TestMain builds.
var gatewayBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runos-gateway-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBin = filepath.Join(dir, "runos-gateway")
	if out, err := exec.Command("go", "build", "-o", gatewayBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build runos-gateway: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	subnet     = "100.100.1.0/24"
	serverAddr = "100.100.1.1"
	devicePool = "100.96.0.0/16"
	deviceAddr = "100.96.0.2"
)

// node is one node host of the test world.
type node struct {
	nid        string
	ns         *netnstest.NS
	controlURL string
	ingress    string // the address devices dial
	token      string
}

type world struct {
	ctl    *testControl
	caFile string
	dev    *netnstest.NS
	nodes  []*node
}

// newWorld builds control, the nodes and one device host: control is
// joined to each node by its own veth (192.0.2.0/30, .4/30), the device to
// each node by its own (198.51.100.0/24, 203.0.113.0/24).
func newWorld(t *testing.T, nids ...string) *world {
	netnstest.Require(t, "ip", "wg", "wireguard-go", "ping", "curl")
	w := &world{ctl: newTestControl(), dev: netnstest.New(t, "dev")}
	ctlNS := netnstest.New(t, "ctl")
	ingress := []string{"198.51.100.21", "203.0.113.22"}
	devSide := []string{"198.51.100.50/24", "203.0.113.50/24"}
	var urls []string
	for i, nid := range nids {
		n := &node{nid: nid, ns: netnstest.New(t, nid), ingress: ingress[i], token: uniq("tok-")}
		ctlIP := fmt.Sprintf("192.0.2.%d", 4*i+1)
		netnstest.Link(t, ctlNS, "to"+nid, ctlIP+"/30", n.ns, "ctl0", fmt.Sprintf("192.0.2.%d/30", 4*i+2))
		netnstest.Link(t, n.ns, "eth1", ingress[i]+"/24", w.dev, fmt.Sprintf("eth%d", i), devSide[i])
		n.controlURL = "https://" + ctlIP
		urls = append(urls, ctlIP+":443")
		w.ctl.addNode(nid, n.token)
		w.nodes = append(w.nodes, n)
	}
	var lns []net.Listener
	for _, a := range urls {
		lns = append(lns, listenIn(t, ctlNS, a))
	}
	w.caFile = w.ctl.serveTLS(t, lns...)
	return w
}

func (w *world) start(t *testing.T, n *node, extra ...string) *gatewayProc {
	return startGateway(t, n.ns, n.nid, n.controlURL, w.caFile, n.token, extra...)
}

func serveAs(role string, peers ...api.GatewayPeer) *api.GatewayService {
	return &api.GatewayService{
		ServiceID: "svc-ky3", CID: "ky3", Role: role, Port: api.DefaultVPNPort,
		Subnet: subnet, Address: serverAddr, DevicePool: devicePool,
		Domains: []string{"ky3.rjwrn.example.com"},
		Peers:   peers,
	}
}

func deviceOf(p *stockPeer) api.GatewayPeer {
	return api.GatewayPeer{DeviceID: "dev-1", PublicKey: p.key.PublicKey().String(), Address: deviceAddr}
}

func atVersion(v uint64, listening bool) func(api.GatewayReport) bool {
	return func(r api.GatewayReport) bool { return r.MapVersion == v && r.Listening == listening }
}

func handshakeOf(k wgtypes.Key, notBefore time.Time) func(api.GatewayReport) bool {
	return func(r api.GatewayReport) bool {
		for _, h := range r.Handshakes {
			if h.PublicKey == k.String() && !h.At.Before(notBefore) {
				return true
			}
		}
		return false
	}
}

func ping(ns *netnstest.NS, addr string) error {
	_, err := ns.Exec("ping", "-c1", "-W5", addr)
	return err
}

func TestInteropWithStockWireGuard(t *testing.T) {
	w := newWorld(t, "n1")
	n1 := w.nodes[0]
	serveWebApp(t, n1.ns, "ky3", "n1")
	g := w.start(t, n1)

	// Not serving yet: the key is made and reported, nothing listens.
	r := w.ctl.waitReport(t, "n1", "at start", atVersion(1, false))
	gwKey := g.privateKey(t)
	if r.PublicKey != gwKey.PublicKey().String() {
		t.Fatalf("reported key %s is not gateway.key's public key", r.PublicKey)
	}
	if st, _ := os.Stat(filepath.Join(g.stateDir, "gateway.key")); st.Mode().Perm() != 0o600 {
		t.Fatalf("gateway.key mode %v", st.Mode().Perm())
	}
	if g.ifindex(t) != 0 {
		t.Fatal("an interface exists before the map asks for one")
	}

	// Control registers a device; the map asks this node to serve it.
	dev := startStockPeer(t, w.dev, deviceAddr)
	v := w.ctl.set(map[string]*api.GatewayService{"n1": serveAs(api.GatewayActive, deviceOf(dev))})
	r = w.ctl.waitReport(t, "n1", "listening", atVersion(v, true))
	if r.ListenPort != api.DefaultVPNPort || r.ServiceID != "svc-ky3" || r.Error != "" {
		t.Fatalf("serving report: %+v", r.GatewayReport)
	}
	index := g.ifindex(t)
	if out := n1.ns.MustExec("wg", "show", g.iface); !strings.Contains(out, dev.key.PublicKey().String()) || !strings.Contains(out, "listening port: 32768") {
		t.Fatalf("stock wg show on the node:\n%s", out)
	}
	if out := n1.ns.MustExec("wg", "show", g.iface, "allowed-ips"); !strings.Contains(out, deviceAddr+"/32") {
		t.Fatalf("allowed ips: %s", out)
	}
	if out := n1.ns.MustExec("ip", "route", "show", devicePool); !strings.Contains(out, "dev "+g.iface) {
		t.Fatalf("device pool route: %q", out)
	}
	if out := n1.ns.MustExec("ip", "-o", "addr", "show", "dev", g.iface); !strings.Contains(out, serverAddr+"/24") {
		t.Fatalf("server address: %s", out)
	}

	// The device, configured from the map, handshakes and passes traffic.
	before := time.Now()
	dev.setServer(t, nil, gwKey.PublicKey(), n1.ingress+":32768", subnet)
	if err := ping(w.dev, serverAddr); err != nil {
		t.Fatalf("ping through the tunnel: %v", err)
	}
	hs := w.ctl.waitReport(t, "n1", "with the device's handshake", handshakeOf(dev.key.PublicKey(), before.Add(-time.Second)))
	t.Logf("handshake reported %v after the device was configured", hs.at.Sub(before).Round(time.Millisecond))
	if out := w.dev.MustExec("curl", "-sS", "--max-time", "10", "http://"+serverAddr+":8080/"); !strings.Contains(out, "cluster=ky3 node=n1") {
		t.Fatalf("HTTP through the tunnel: %q", out)
	}
	if out := n1.ns.MustExec("wg", "show", g.iface, "latest-handshakes"); strings.Contains(out, "\t0\n") {
		t.Fatalf("wg show lists no handshake: %s", out)
	}

	// Cluster DNS through the tunnel, UDP and TCP.
	dnsServer := serverAddr + ":53"
	for _, network := range []string{"udp", "tcp"} {
		for _, name := range []string{"ky3.rjwrn.example.com.", "app.ky3.rjwrn.example.com.", "K8S.ky3.rjwrn.example.com."} {
			m := dnsQuery(t, w.dev, network, dnsServer, name, dns.TypeA)
			if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != serverAddr {
				t.Fatalf("%s %s: %v", network, name, m)
			}
		}
		if m := dnsQuery(t, w.dev, network, dnsServer, "app.ky3.rjwrn.example.com.", dns.TypeAAAA); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
			t.Fatalf("%s AAAA: %v", network, m)
		}
		if m := dnsQuery(t, w.dev, network, dnsServer, "www.example.test.", dns.TypeA); m.Rcode != dns.RcodeRefused || len(m.Answer) != 0 {
			t.Fatalf("%s outside name: %v", network, m)
		}
	}
	// New domains take effect without restarting anything.
	s := serveAs(api.GatewayActive, deviceOf(dev))
	s.Domains = append(s.Domains, "apps.customer.test")
	v = w.ctl.set(map[string]*api.GatewayService{"n1": s})
	w.ctl.waitReport(t, "n1", "after the domains change", atVersion(v, true))
	if m := dnsQuery(t, w.dev, "udp", dnsServer, "shop.apps.customer.test.", dns.TypeA); len(m.Answer) != 1 {
		t.Fatalf("custom domain: %v", m)
	}
	if g.ifindex(t) != index {
		t.Fatal("the interface was re-created for a domains change")
	}

	// The device leaves the map: it leaves the interface, the interface stays.
	v = w.ctl.set(map[string]*api.GatewayService{"n1": serveAs(api.GatewayActive)})
	w.ctl.waitReport(t, "n1", "after the peer left", atVersion(v, true))
	if out := n1.ns.MustExec("wg", "show", g.iface, "peers"); strings.TrimSpace(out) != "" {
		t.Fatalf("peer still on the interface: %q", out)
	}
	if got := g.ifindex(t); got != index {
		t.Fatalf("ifindex %d, was %d: the interface was restarted", got, index)
	}
	if _, err := w.dev.Exec("ping", "-c1", "-W2", serverAddr); err == nil {
		t.Fatal("traffic still passes after the peer was removed")
	}
	if _, err := w.dev.Exec("curl", "-sS", "--max-time", "3", "http://"+serverAddr+":8080/"); err == nil {
		t.Fatal("HTTP still passes after the peer was removed")
	}

	// Serve nothing: the interface, its route and the DNS go.
	v = w.ctl.set(map[string]*api.GatewayService{"n1": nil})
	r = w.ctl.waitReport(t, "n1", "after serve nil", atVersion(v, false))
	if r.ListenPort != 0 || len(r.Handshakes) != 0 {
		t.Fatalf("not-serving report: %+v", r.GatewayReport)
	}
	if g.ifindex(t) != 0 {
		t.Fatal("interface still there after serve nil")
	}
	if out, _ := n1.ns.Exec("ip", "route", "show", devicePool); strings.TrimSpace(out) != "" {
		t.Fatalf("route left behind: %q", out)
	}
	if _, err := os.Stat("/var/run/wireguard/" + g.iface + ".sock"); err == nil {
		t.Fatal("UAPI socket left behind")
	}
	if strings.Contains(g.logs.String(), gwKey.String()) {
		t.Fatal("the private key appears in the gateway's log")
	}
	for _, want := range []string{"msg=serving", `msg="peer added" device=dev-1`, `msg="peer removed" device=dev-1`, "msg=handshake device=dev-1", `msg="stopped serving"`} {
		if !strings.Contains(g.logs.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// A move as control runs it: the target comes up as standby with every
// peer, the switch makes it active and the old node draining in one
// commit, the device swaps its peer, the target reports the handshake, and
// the old node stops. No serving interface is ever restarted.
func TestMoveRolesAndHandshakeReports(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	n1, n2 := w.nodes[0], w.nodes[1]
	serveWebApp(t, n1.ns, "ky3", "n1")
	serveWebApp(t, n2.ns, "ky3", "n2")
	// A heartbeat near the limit: handshake reports must come from the
	// watch after a change, not from the heartbeat.
	g1 := w.start(t, n1, "--heartbeat", "29s")
	g2 := w.start(t, n2, "--heartbeat", "29s")
	dev := startStockPeer(t, w.dev, deviceAddr)
	peer := deviceOf(dev)

	v := w.ctl.set(map[string]*api.GatewayService{"n1": serveAs(api.GatewayActive, peer)})
	r1 := w.ctl.waitReport(t, "n1", "active", atVersion(v, true))
	dev.setServer(t, nil, g1.privateKey(t).PublicKey(), n1.ingress+":32768", subnet)
	if err := ping(w.dev, serverAddr); err != nil {
		t.Fatalf("ping n1: %v", err)
	}
	idx1 := g1.ifindex(t)

	// The target comes up as standby with every current peer.
	s := serveAs(api.GatewayStandby, peer)
	s.MoveID = "mv-1"
	v = w.ctl.set(map[string]*api.GatewayService{"n2": s})
	r2 := w.ctl.waitReport(t, "n2", "standby listening", atVersion(v, true))
	if r2.PublicKey == r1.PublicKey || r2.PublicKey != g2.privateKey(t).PublicKey().String() {
		t.Fatalf("n2 must serve with its own key: n1 %s n2 %s", r1.PublicKey, r2.PublicKey)
	}
	idx2 := g2.ifindex(t)
	if out := n2.ns.MustExec("wg", "show", g2.iface, "peers"); !strings.Contains(out, dev.key.PublicKey().String()) {
		t.Fatalf("standby lacks the peer: %q", out)
	}

	// The switch: one commit for both nodes; the device swaps its peer.
	active, draining := serveAs(api.GatewayActive, peer), serveAs(api.GatewayDraining, peer)
	active.MoveID, draining.MoveID = "mv-1", "mv-1"
	v = w.ctl.set(map[string]*api.GatewayService{"n2": active, "n1": draining})
	switched := time.Now()
	n2Key, err := wgtypes.ParseKey(r2.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	n1Key, _ := wgtypes.ParseKey(r1.PublicKey)
	dev.setServer(t, &n1Key, n2Key, n2.ingress+":32768", subnet)
	if err := ping(w.dev, serverAddr); err != nil {
		t.Fatalf("ping after the swap: %v", err)
	}
	hs := w.ctl.waitReport(t, "n2", "with the device's handshake after the switch", handshakeOf(dev.key.PublicKey(), switched))
	t.Logf("n2 reported the device's handshake %v after the switch (heartbeat 29s)", hs.at.Sub(switched).Round(time.Millisecond))
	w.ctl.waitReport(t, "n1", "draining", atVersion(v, true))
	w.ctl.waitReport(t, "n2", "active", atVersion(v, true))
	if out := w.dev.MustExec("curl", "-sS", "--max-time", "10", "http://"+serverAddr+":8080/"); !strings.Contains(out, "node=n2") {
		t.Fatalf("after the move the page should name n2: %q", out)
	}
	if g1.ifindex(t) != idx1 || g2.ifindex(t) != idx2 {
		t.Fatal("a role change restarted an interface")
	}

	// The old node stops; the new one serves on.
	v = w.ctl.set(map[string]*api.GatewayService{"n1": nil})
	w.ctl.waitReport(t, "n1", "stopped", atVersion(v, false))
	if g1.ifindex(t) != 0 {
		t.Fatal("n1's interface still there")
	}
	if err := ping(w.dev, serverAddr); err != nil {
		t.Fatalf("ping n2 after n1 stopped: %v", err)
	}
	if g2.ifindex(t) != idx2 {
		t.Fatal("n2's interface restarted")
	}
	for _, want := range []string{"role=standby", "from=standby to=active"} {
		if !strings.Contains(g2.logs.String(), want) {
			t.Errorf("n2 log lacks %q", want)
		}
	}
	if !strings.Contains(g1.logs.String(), "from=active to=draining") {
		t.Error("n1 log lacks the role change to draining")
	}
}

// SIGTERM stops serving: interface, route, DNS and UAPI socket go, the last
// report says not listening, and the exit is clean.
func TestSIGTERMCleansUp(t *testing.T) {
	w := newWorld(t, "n1")
	n1 := w.nodes[0]
	g := w.start(t, n1)
	v := w.ctl.set(map[string]*api.GatewayService{"n1": serveAs(api.GatewayActive)})
	w.ctl.waitReport(t, "n1", "listening", atVersion(v, true))
	if g.ifindex(t) == 0 {
		t.Fatal("no interface")
	}
	if err := g.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	w.ctl.waitReport(t, "n1", "saying it stopped listening", atVersion(v, false))
	if g.ifindex(t) != 0 {
		t.Fatal("interface left after SIGTERM")
	}
	if out, _ := n1.ns.Exec("ip", "route", "show", devicePool); strings.TrimSpace(out) != "" {
		t.Fatalf("route left after SIGTERM: %q", out)
	}
	if !strings.Contains(g.logs.String(), "runos-gateway stopped") {
		t.Error("no stop line in the log")
	}
}

// The gateway verifies control's certificate and its token: without the
// CA, or with a wrong token, it serves nothing and says why.
func TestRefusesUnverifiedControlAndBadToken(t *testing.T) {
	w := newWorld(t, "n1")
	n1 := w.nodes[0]
	w.ctl.set(map[string]*api.GatewayService{"n1": serveAs(api.GatewayActive)})
	noCA := startGateway(t, n1.ns, "n1", n1.controlURL, "", n1.token)
	badTok := startGateway(t, n1.ns, "n1", n1.controlURL, w.caFile, "wrong-token")
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, b := noCA.logs.String(), badTok.logs.String()
		if strings.Contains(a, "certificate") && strings.Contains(b, "check that --token-file holds this node's enrollment token") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no clear errors:\n--- no CA:\n%s\n--- bad token:\n%s", a, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if noCA.ifindex(t) != 0 || badTok.ifindex(t) != 0 {
		t.Fatal("a gateway that cannot trust control serves anyway")
	}
}
