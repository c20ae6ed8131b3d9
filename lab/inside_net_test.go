//go:build !windows

package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
)

// TestInsideForReal builds the lab and checks each cluster's inside from
// its nodes: ClusterIPs reach the pods (on ky3 on another node), kube-dns
// answers through its ClusterIP, the API answers on the VIP with a
// certificate of the lab's CA, nodes reach each other's internal address,
// both clusters use the same prefixes, and kubectl lists the pods with the
// cluster's kubeconfig (from a node, where k8s.<cid>… is the VIP).
func TestInsideForReal(t *testing.T) {
	t.Parallel()
	l := upNetwork(t, 1)
	env := l.Env()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range env.Clusters {
		if len(c.Services) == 0 || strings.Join(c.InternalPrefixes, ",") != "10.10.0.0/24,10.244.0.0/16,10.96.0.0/12" {
			t.Fatalf("env.json %s: services %+v, prefixes %v", c.CID, c.Services, c.InternalPrefixes)
		}
		n1 := c.Nodes[0].Host
		svc := c.Services[0]
		if body, err := l.Get(ctx, n1, "http://"+svc.ClusterIP+"/"); err != nil || !strings.Contains(body, svc.Body) {
			t.Errorf("%s: GET the web Service from %s = %q, %v; want %q", c.CID, n1, body, err, svc.Body)
		}
		if got, err := l.ResolveAt(ctx, n1, c.ClusterDNS+":53", "web.default.svc.cluster.local"); err != nil || got[0] != svc.ClusterIP {
			t.Errorf("%s: kube-dns from %s: %v, %v", c.CID, n1, got, err)
		}
		last := c.Nodes[len(c.Nodes)-1]
		if body, err := l.Get(ctx, n1, "http://"+last.InternalIP+"/"); err != nil || !strings.Contains(body, WebAppBody(c.CID, last.NID)) {
			t.Errorf("%s: GET %s's internal address from %s = %q, %v", c.CID, last.NID, n1, body, err)
		}
		if body, err := l.Get(ctx, last.Host, "https://"+c.APIVIP+":6443/version"); err != nil || !strings.Contains(body, "runos-lab") {
			t.Errorf("%s: the API on the VIP from %s = %q, %v", c.CID, last.Host, body, err)
		}
		// More than the mesh's MTU in one go: 4 MiB from the other node.
		if got := hostRun(t, l, n1, "curl -sS -o /dev/null -w '%{size_download}' http://"+last.InternalIP+"/bytes/4194304"); got != "4194304" {
			t.Errorf("%s: 4 MiB from %s's internal address: %s bytes", c.CID, last.NID, got)
		}
		assertMesh(t, l, c)
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		return
	}
	for _, c := range env.Clusters {
		// On the node, the API's name is the VIP (a hosts entry in this
		// command only): the kubeconfig is the laptop's, as it is.
		script := "echo '" + c.APIVIP + " " + c.APIName + "' > /tmp/hosts.$$ && mount --bind /tmp/hosts.$$ /etc/hosts && kubectl --kubeconfig " + c.Kubeconfig + " get pods -A"
		cmd, err := l.Command(ctx, c.Nodes[0].Host, nil, "unshare", "-m", "sh", "-c", script)
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "web-"+c.Services[0].Node) {
			t.Errorf("%s: kubectl get pods: %v\n%s", c.CID, err, out)
		}
	}
}

// assertMesh checks that a cluster's internal network is its WireGuard
// mesh: on every node, wg lists each other node as a peer at its public
// address with the mesh's port, a handshake done and bytes received (the
// test's traffic above crossed it).
func assertMesh(t *testing.T, l *Lab, c EnvCluster) {
	t.Helper()
	if c.Mesh == nil || c.Mesh.Kind != "wireguard" || c.Mesh.Interface != insideIf || c.Mesh.Port != meshPort {
		t.Errorf("env.json %s: mesh %+v", c.CID, c.Mesh)
		return
	}
	for _, n := range c.Nodes {
		dump := hostRun(t, l, n.Host, "wg show "+insideIf+" dump; ip -o link show "+insideIf+" | grep -o 'mtu [0-9]*'")
		lines := strings.Split(strings.TrimSpace(dump), "\n")
		if len(lines) != len(c.Nodes)+1 || lines[len(lines)-1] != "mtu "+strconv.Itoa(c.Mesh.MTU) {
			t.Errorf("%s: wg show %s: want %d peer(s) and MTU %d:\n%s", n.Host, insideIf, len(c.Nodes)-1, c.Mesh.MTU, dump)
			continue
		}
		// Interface line: private-key public-key listen-port fwmark.
		if f := strings.Fields(lines[0]); len(f) < 3 || f[2] != strconv.Itoa(meshPort) {
			t.Errorf("%s: mesh interface %q, want listen port %d", n.Host, lines[0], meshPort)
		}
		for _, o := range c.Nodes {
			if o.NID == n.NID {
				continue
			}
			h, _ := l.topo.Host(o.Host)
			endpoint := fmt.Sprintf("%s:%d", h.Addrs[WAN], meshPort)
			// Peer lines: public-key psk endpoint allowed-ips handshake rx tx keepalive.
			found := false
			for _, line := range lines[1 : len(lines)-1] {
				f := strings.Fields(line)
				if len(f) < 7 || f[2] != endpoint {
					continue
				}
				found = true
				hs, _ := strconv.ParseInt(f[4], 10, 64)
				rx, _ := strconv.ParseInt(f[5], 10, 64)
				if !strings.Contains(f[3], o.InternalIP+"/32") || hs == 0 || time.Since(time.Unix(hs, 0)) > 3*time.Minute || rx == 0 {
					t.Errorf("%s: peer %s: allowed %s, handshake %s, received %s", n.Host, o.Host, f[3], f[4], f[5])
				}
			}
			if !found {
				t.Errorf("%s: no mesh peer at %s:\n%s", n.Host, endpoint, dump)
			}
		}
	}
}

// TestUpFailsCleanlyWithoutMesh: ky3-n2's wireguard-go dies at once (a
// wrapper in the lab's program directory, first on the nodes' PATH, runs
// Debian's on the other nodes): up fails naming the mesh, and leaves
// nothing behind, the other nodes' running wireguard-go included.
func TestUpFailsCleanlyWithoutMesh(t *testing.T) {
	t.Parallel()
	netnstest.Require(t, "ip", "unshare", "nsenter", "findmnt", "dnsmasq", "wireguard-go")
	real, _ := exec.LookPath("wireguard-go")
	bin := t.TempDir()
	if err := os.Symlink(filepath.Join(binDir, "runos-lab"), filepath.Join(bin, "runos-lab")); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nif [ \"$RUNOS_LAB_HOST\" = ky3-n2 ]; then echo no TUN here >&2; exit 1; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "wireguard-go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "lab")
	_, err := Up(context.Background(), Options{Dir: dir, BinDir: bin, Skip: []string{"control", "gateway", "vpnd"}})
	if err == nil || !strings.Contains(err.Error(), "mesh on ky3-n2 exited") || !strings.Contains(err.Error(), "no TUN here") {
		t.Fatalf("up with a failing wireguard-go on ky3-n2: %v", err)
	}
	assertGone(t, dir, NamesFor(dir).Prefix, nil)
	out, _ := exec.Command("pgrep", "-x", "wireguard-go").Output()
	for _, pid := range strings.Fields(string(out)) {
		if env, _ := os.ReadFile("/proc/" + pid + "/environ"); strings.Contains(string(env), "RUNOS_LAB_DIR="+dir+"\x00") {
			t.Errorf("wireguard-go %s of the failed lab still runs", pid)
		}
	}
}
