package kube

import (
	"context"
	"encoding/pem"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var world = World{Cluster: "ky3",
	Services: []Service{
		{Name: "web", Namespace: "default", ClusterIP: netip.MustParseAddr("10.96.0.20"), Port: 80},
		{Name: "db", Namespace: "data", Pods: []netip.Addr{netip.MustParseAddr("10.244.2.11"), netip.MustParseAddr("10.244.2.12")}},
	},
	Pods: []Pod{{Name: "web-1", Namespace: "default", Node: "n2", IP: netip.MustParseAddr("10.244.2.10")}},
}

func TestDNSAnswers(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: NewDNS(world)}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	ask := func(name string) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, err := dns.Exchange(m, pc.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := ask("web.default.svc.cluster.local."); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.96.0.20" {
		t.Errorf("web: %v", r)
	}
	if r := ask("DB.data.svc.cluster.local."); len(r.Answer) != 2 {
		t.Errorf("headless db: %v", r)
	}
	if r := ask("nope.default.svc.cluster.local."); r.Rcode != dns.RcodeNameError {
		t.Errorf("unknown: %v", r)
	}
	if r := ask("example.com."); r.Rcode != dns.RcodeRefused {
		t.Errorf("outside: %v", r)
	}
}

// kubectl (the one on PATH) lists the stand-in's pods and its version.
func TestKubectlGetPods(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl on PATH")
	}
	ts := httptest.NewTLSServer(API(world, time.Now()))
	defer ts.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(Kubeconfig("ky3", ts.URL, ca)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{{"get", "pods"}, {"version"}} {
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kc}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
		want := "web-1"
		if args[0] == "version" {
			want = Version
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl %s: no %q in\n%s", strings.Join(args, " "), want, out)
		}
	}
}
