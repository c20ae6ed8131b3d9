//go:build !windows

package lab

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
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
