//go:build !windows

package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/runos/vpn/lab/kube"
)

// writeInsideFiles writes, per cluster, what its kube-dns and API stand-ins
// know, the API server's certificate from the lab's CA (naming
// k8s.<cid>.<aid>.<root>, the VIP and the kubernetes Service's ClusterIP)
// and the cluster's kubeconfig, which kubectl uses as it is.
func (l *Lab) writeInsideFiles(pki *PKI) error {
	if err := l.j.file("kube"); err != nil {
		return err
	}
	if err := os.MkdirAll(l.kubeDir(), 0o755); err != nil {
		return err
	}
	for _, c := range l.topo.Clusters {
		w, err := json.MarshalIndent(c.KubeWorld(), "", "  ")
		if err != nil {
			return err
		}
		name := l.topo.APIName(c.CID)
		cert, key, err := pki.Leaf("kube-apiserver "+c.CID+" (lab)", []string{name, "kubernetes", "kubernetes.default.svc"},
			[]netip.Addr{InsideAPIVIP, insideKubernetes})
		if err != nil {
			return fmt.Errorf("API certificate of %s: %w", c.CID, err)
		}
		server := "https://" + name + ":" + strconv.Itoa(APIPort)
		for _, f := range []struct {
			path string
			b    []byte
			mode os.FileMode
		}{
			{l.kubeWorldFile(c.CID), w, 0o644},
			{l.kubeCert(c.CID), cert, 0o644},
			{l.kubeKey(c.CID), key, 0o600},
			{l.kubeconfig(c.CID), []byte(kube.Kubeconfig(c.CID, server, l.caFile())), 0o644},
		} {
			if err := os.WriteFile(f.path, f.b, f.mode); err != nil {
				return err
			}
		}
	}
	return nil
}

// insideProcs are the stand-ins inside a cluster: kube-dns and the API on
// its first node, the web Service's pod on its last.
func (l *Lab) insideProcs(c Cluster) []Proc {
	bin := filepath.Join(l.bin, "runos-lab")
	dnsHost, webHost := NodeHost(c.CID, c.dnsNode()), NodeHost(c.CID, c.webNode())
	return []Proc{
		{Host: dnsHost, Name: "kubedns", Argv: []string{bin, "kubedns", "--world", l.kubeWorldFile(c.CID),
			"--listen", netip.AddrPortFrom(c.podIP(c.dnsNode(), 53), 53).String()}},
		{Host: dnsHost, Name: "kubeapi", Argv: []string{bin, "kubeapi", "--world", l.kubeWorldFile(c.CID),
			"--listen", netip.AddrPortFrom(InsideAPIVIP, APIPort).String(), "--cert", l.kubeCert(c.CID), "--key", l.kubeKey(c.CID)}},
		{Host: webHost, Name: "podapp", Argv: []string{bin, "webapp", "--cluster", c.CID, "--node", c.webNode(),
			"--listen", netip.AddrPortFrom(c.podIP(c.webNode(), 10), podAppPort).String()}},
	}
}

// insideEnv is a cluster's inside as env.json gives it.
func (l *Lab) insideEnv(c Cluster, ec *EnvCluster) {
	ec.Kubeconfig = l.kubeconfig(c.CID)
	ec.APIName = l.topo.APIName(c.CID)
	ec.InternalPrefixes = []string{InsideNodeNetwork.String(), InsidePodRange.String(), InsideServiceRange.String()}
	ec.ClusterDNS = InsideDNS.String()
	ec.APIVIP = InsideAPIVIP.String()
	ec.OutputOnlyDNAT = c.OutputOnlyDNAT()
	ec.Mesh = meshEnv()
	ec.Services = []EnvService{{Name: "web", Namespace: "default", ClusterIP: insideWeb.String(), Port: 80,
		DNSName: l.topo.ServiceDNSName(c.CID, "web", "default"), Node: c.webNode(),
		PodIP: c.podIP(c.webNode(), 10).String(), Body: WebAppBody(c.CID, c.webNode())}}
	for i := range ec.Nodes {
		ec.Nodes[i].InternalIP = c.InternalIP(ec.Nodes[i].NID).String()
	}
}

// insideReady checks a stand-in from its node: kube-dns answers its
// Service's name through the ClusterIP, the API its version on the VIP,
// the pod its body through the ClusterIP (so the DNAT rules work too).
func (l *Lab) insideReady(p Proc) func(context.Context) error {
	h, _ := l.topo.Host(p.Host)
	var c Cluster
	for _, x := range l.topo.Clusters {
		if x.CID == h.CID {
			c = x
		}
	}
	return func(ctx context.Context) error {
		switch p.Name {
		case "kubedns":
			_, err := l.ResolveAt(ctx, p.Host, netip.AddrPortFrom(InsideDNS, 53).String(), "web.default.svc."+kube.Domain)
			return err
		case "kubeapi":
			_, err := l.Get(ctx, p.Host, "https://"+netip.AddrPortFrom(InsideAPIVIP, APIPort).String()+"/version")
			return err
		default:
			body, err := l.Get(ctx, p.Host, "http://"+insideWeb.String()+"/")
			if err == nil && !strings.Contains(body, WebAppBody(c.CID, c.webNode())) {
				err = fmt.Errorf("the web Service answered %q", body)
			}
			return err
		}
	}
}
