//go:build !windows

package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// moveResult is the part of `runos services wireguard move --json` the
// tests read (issue 3).
type moveResult struct {
	Warnings    []string `json:"warnings"`
	Endpoint    string   `json:"endpoint"`
	AddressKind string   `json:"addressKind"`
	State       string   `json:"state"`
	Devices     struct {
		Total    int `json:"total"`
		Switched int `json:"switched"`
	} `json:"devices"`
	SwitchMs        int64  `json:"switchMs"`
	ControlSwitchMs int64  `json:"controlSwitchMs"` // control's own, without the command's lead
	Error           string `json:"error"`
}

// move runs the operator's move on a laptop with the operator token.
func (w *world) move(target string) (moveResult, string, error) {
	w.t.Helper()
	ky3, _ := w.env.Cluster("ky3")
	out, err := w.run(w.env.Client.Host, []string{"RUNOS_TOKEN=" + w.env.OperatorToken},
		"runos", "services", "wireguard", "move", ky3.VPNService.ID, "--cid", "ky3",
		"--target-node-id", target, "--follow", "--json")
	var m moveResult
	if i := strings.Index(out, "{"); i >= 0 {
		dec := json.NewDecoder(strings.NewReader(out[i:]))
		_ = dec.Decode(&m)
	}
	return m, out, err
}

// TestMoveTwoLaptops is issue 3's move: two laptops connected to ky3, the
// server moved n1 → n2 (private to public: it warns) and back; both follow
// by themselves (no daemon restarted), and the page names the new node. A
// move to a node whose gateway is down fails and changes nothing.
func TestMoveTwoLaptops(t *testing.T) {
	w := newWorld(t, 2, 0)
	laptops := []string{w.env.Clients[0].Host, w.env.Clients[1].Host}
	pids := map[string]int{}
	addr := ""
	for _, h := range laptops {
		w.must(h, nil, "runos", "vpn", "up", "--cid", "ky3")
		st := w.waitStatus(h, 30*time.Second, "connected to ky3 on n1", upOn("n1", "ky3"))
		c, _ := cluster(st, "ky3")
		addr = c.Server.Address
		pids[h] = w.pidOf(h, "vpnd")
	}
	pageNames := func(node string) {
		t.Helper()
		for _, h := range laptops {
			if out, err := w.page(h, "http://"+addr+"/"); err != nil || !strings.Contains(out, "cluster=ky3 node="+node) {
				t.Errorf("%s: page %q, %v; want node=%s", h, out, err, node)
			}
		}
	}
	pageNames("n1")

	for _, step := range []struct {
		target, endpoint, kind string
		warn                   bool
	}{
		{"n2", "198.51.100.22:32768", "public", true}, // private → public
		{"n1", "10.77.0.21:32768", "private", false},
	} {
		m, out, err := w.move(step.target)
		t.Logf("move to %s:\n%s", step.target, out)
		if err != nil {
			t.Fatalf("move to %s: %v", step.target, err)
		}
		if m.Endpoint != step.endpoint || m.AddressKind != step.kind || m.Devices.Total != 2 || m.Devices.Switched != 2 {
			t.Errorf("move to %s: %+v", step.target, m)
		}
		if step.warn && (len(m.Warnings) == 0 || !strings.Contains(strings.Join(m.Warnings, " "), "public")) {
			t.Errorf("move from a private to a public address did not warn: %v", m.Warnings)
		}
		for _, h := range laptops {
			st := w.waitStatus(h, 10*time.Second, "on "+step.target+" with peerUp", upOn(step.target, "ky3"))
			c, _ := cluster(st, "ky3")
			if c.Server.Endpoint != step.endpoint || c.Server.Address != addr {
				t.Errorf("%s after the move: server %+v (address must stay %s)", h, c.Server, addr)
			}
		}
		pageNames(step.target)
	}

	// The target's gateway is down: the move fails and nothing changes.
	if err := w.lab.Stop("ky3-n2", "gateway", syscall.SIGKILL, time.Second); err != nil {
		t.Fatal(err)
	}
	m, out, err := w.move("n2")
	t.Logf("move to n2 with its gateway down:\n%s", out)
	if err == nil || m.State != "failed" {
		t.Errorf("a move to a node whose gateway is down did not fail: %+v (%v)", m, err)
	}
	// It says why: n2's gateway did not bring the server up, and no device
	// was told (in the JSON's error and on the command's error output).
	if !strings.Contains(m.Error, "n2") || !strings.Contains(m.Error, "no device was told anything") ||
		!strings.Contains(out, "devices were not changed") {
		t.Errorf("the failed move does not say why (error %q):\n%s", m.Error, out)
	}
	for _, h := range laptops {
		st := w.status(h)
		if !upOn("n1", "ky3")(st) {
			c, _ := cluster(st, "ky3")
			t.Errorf("%s after the failed move: %+v", h, c)
		}
	}
	pageNames("n1")
	ctl, err := w.lab.APIClient("control", w.env.OperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := ctl.VPNServices(t.Context(), "ky3")
	if err != nil || len(ss) != 1 || ss[0].NodeID != "n1" {
		t.Errorf("ky3's service after the failed move: %+v %v", ss, err)
	}

	for _, h := range laptops {
		if got := w.pidOf(h, "vpnd"); got != pids[h] {
			t.Errorf("%s's daemon was restarted (%d → %d)", h, pids[h], got)
		}
	}
}
