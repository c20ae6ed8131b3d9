//go:build !windows

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestGatewayKilledMidJoin stops the gateway serving ky3 dead at a join's
// two worst moments (a runos-gateway built with runosfault; internal/fault):
//
//   - gateway-join-applied: the laptop's peer is in the server, but the
//     report that control's join answer waits for is not out, and the map
//     is not kept on disk (gateway/kept.go keepsLater);
//   - gateway-join-unkept: the report is queued (perhaps sent), the kept
//     file still holds the map without the laptop.
//
// The laptop's `runos vpn up` is running meanwhile. The gateway is started
// again (the lab's build, as a service manager would) and the `up` must
// end connected, through the tunnel, with the node's kept map, WireGuard
// peers and forwarding rules as a gateway that never died would have them.
func TestGatewayKilledMidJoin(t *testing.T) {
	exe := faultBuild(t, "runos-gateway")
	for _, point := range []string{"gateway-join-applied", "gateway-join-unkept"} {
		t.Run(point, func(t *testing.T) { gatewayKilledMidJoin(t, exe, point) })
	}
}

func gatewayKilledMidJoin(t *testing.T, exe, point string) {
	w := newWorld(t, 1, 0)
	laptop, node := w.env.Client.Host, "ky3-n1"
	gw := w.startFaultBuild(node, "gateway", exe, point)
	var rules string
	w.waitFor(10*time.Second, "the fault build forwarding into ky3", func() bool {
		out, err := w.run(node, nil, "nft", "--stateless", "list", "table", "inet", "runos_reach")
		rules = listenPorts.ReplaceAllString(out, "to :PORT")
		return err == nil
	})

	type upResult struct {
		out string
		err error
	}
	up := make(chan upResult, 1)
	started := time.Now()
	go func() {
		out, err := w.run(laptop, nil, "runos", "vpn", "up", "--cid", "ky3", "--json")
		up <- upResult{out, err}
	}()

	w.waitStoppedDead(gw, point, 15*time.Second)
	died := time.Since(started)
	// While nothing serves ky3, its status does not say up.
	if c, _ := cluster(w.status(laptop), "ky3"); c.PeerUp {
		t.Errorf("ky3 peerUp while its gateway is dead: %+v", c)
	}
	restarted := time.Now()
	if err := w.lab.Restart(t.Context(), node, "gateway"); err != nil {
		t.Fatal(err)
	}
	var r upResult
	select {
	case r = <-up:
	case <-time.After(40 * time.Second):
		t.Fatal("runos vpn up still waiting 40 s after the gateway came back")
	}
	if r.err != nil {
		t.Fatalf("runos vpn up: %v\n%s", r.err, r.out)
	}
	t.Logf("%s: the gateway died %v into the join; started again → `runos vpn up` done %v later",
		point, died.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))

	st := w.waitStatus(laptop, 10*time.Second, "ky3 up on n1", upOn("n1", "ky3"))
	c, _ := cluster(st, "ky3")
	if out, err := w.page(laptop, "http://"+c.Server.Address+"/"); err != nil || !strings.Contains(out, "node=n1") {
		t.Errorf("no page through ky3 after the gateway came back: %q %v", out, err)
	}
	// The node as if the gateway had never died: one peer, the laptop; the
	// map with it kept; the forwarding rules as they were.
	if peers := strings.Fields(w.gatewayPeers(node)); len(peers) != 2 || peers[1] != st.Tunnel.PublicKey {
		t.Errorf("ky3-n1's WireGuard peers %q, want the laptop's %s alone", peers, st.Tunnel.PublicKey)
	}
	w.waitFor(10*time.Second, "the map with the laptop kept on ky3-n1", func() bool {
		return keptPeers(t, filepath.Join(w.env.Dir, "hosts", node, "state", "last-map.json"))[st.Tunnel.PublicKey]
	})
	// (The transparent listeners' ports are the new process's own.)
	after := w.stdout(node, nil, "nft", "--stateless", "list", "table", "inet", "runos_reach")
	if after = listenPorts.ReplaceAllString(after, "to :PORT"); after != rules {
		t.Errorf("the forwarding rules changed across the kill:\nbefore:\n%s\nafter:\n%s", rules, after)
	}
	// And the status says nothing of the outage any more.
	if c.Error != "" {
		t.Errorf("ky3 up with an error: %q", c.Error)
	}
	var printed localapi.Status
	if err := json.NewDecoder(strings.NewReader(r.out)).Decode(&printed); err != nil { // stdout first, then stderr
		t.Errorf("runos vpn up --json printed no status: %v\n%s", err, r.out)
	}
}

// startFaultBuild stops a host's program and starts exe (a runosfault
// build, faultBuild) in its place with the lab's arguments, told to stop
// dead at point.
func (w *world) startFaultBuild(host, name, exe, point string) lab.ProcRecord {
	w.t.Helper()
	if err := w.lab.Stop(host, name, syscall.SIGTERM, 5*time.Second); err != nil {
		w.t.Fatal(err)
	}
	if err := w.lab.RestartWith(w.t.Context(), host, name, exe, "RUNOS_FAULT="+point); err != nil {
		w.t.Fatal(err)
	}
	p, _ := w.lab.Proc(host, name)
	return p
}

// waitStoppedDead waits until p has stopped dead at point (its log says
// so; any other death fails the test) and drops its record from the lab,
// so that the lab's own build can be started in its place.
func (w *world) waitStoppedDead(p lab.ProcRecord, point string, timeout time.Duration) {
	w.t.Helper()
	w.waitFor(timeout, p.Name+" stopped dead at "+point, func() bool { return !p.Alive() })
	if b, _ := os.ReadFile(p.Log); !strings.Contains(string(b), "fault: stopped dead at "+point) {
		w.t.Fatalf("%s on %s died, but not at %s:\n%s", p.Name, p.Host, point, tail(string(b), 20))
	}
	if err := w.lab.Stop(p.Host, p.Name, syscall.SIGKILL, 0); err != nil {
		w.t.Fatal(err)
	}
}

// listenPorts matches the gateway's transparent listeners in its rules.
var listenPorts = regexp.MustCompile(`to :[0-9]+`)

// faultBuild builds one of the project's programs (runos, runos-gateway)
// with the runosfault tag (internal/fault).
func faultBuild(t *testing.T, program string) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), program)
	if out, err := exec.Command("go", "build", "-tags", "runosfault", "-o", exe, "../cmd/"+program).CombinedOutput(); err != nil {
		t.Fatalf("go build -tags runosfault ../cmd/%s: %v\n%s", program, err, out)
	}
	return exe
}

// keptPeers reads a gateway's kept map: the public keys it serves.
func keptPeers(t *testing.T, path string) map[string]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var k struct {
		Map api.GatewayMap `json:"map"`
	}
	if err := json.Unmarshal(b, &k); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	keys := map[string]bool{}
	if k.Map.Serve != nil {
		for _, p := range k.Map.Serve.Peers {
			keys[p.PublicKey] = true
		}
	}
	return keys
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
