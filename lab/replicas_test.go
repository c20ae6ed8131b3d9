//go:build !windows

package lab

import (
	"strings"
	"testing"
)

func TestTopologyWithReplicas(t *testing.T) {
	topo, err := TopologyFor(2, StorePostgres, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"control": "198.51.100.10", "db": "198.51.100.5",
		"control-1": "198.51.100.11", "control-2": "198.51.100.12", "control-3": "198.51.100.13"}
	for name, addr := range want {
		h, ok := topo.Host(name)
		if !ok || h.Addrs[WAN].String() != addr {
			t.Errorf("host %s = %+v, want WAN %s", name, h, addr)
		}
	}
	var ctl []string
	for _, h := range topo.ControlHosts() {
		ctl = append(ctl, h.Name)
	}
	if strings.Join(ctl, ",") != "control-1,control-2,control-3" {
		t.Errorf("control hosts %v", ctl)
	}
	one, _ := TopologyFor(1, StorePostgres, 1)
	if hs := one.ControlHosts(); len(hs) != 1 || hs[0].Name != "control" {
		t.Errorf("one replica on PostgreSQL runs on control: %+v", hs)
	}
	if _, ok := one.Host("db"); !ok {
		t.Error("no db host with --store postgres")
	}
	def, _ := DefaultTopology(1)
	if _, ok := def.Host("db"); ok || def.Store != StoreSQLite || def.Replicas != 1 {
		t.Errorf("the default lab changed: %+v", def)
	}
	for _, c := range []struct {
		store string
		n     int
		want  string
	}{{StoreSQLite, 2, "needs --store postgres"}, {"mysql", 1, "want sqlite or postgres"}, {StorePostgres, 10, "want 1 to 9"}} {
		if _, err := TopologyFor(1, c.store, c.n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--store %s --control-replicas %d: %v, want %q", c.store, c.n, err, c.want)
		}
	}
}

func TestReplicaProcsAndBalancer(t *testing.T) {
	topo, _ := TopologyFor(1, StorePostgres, 3)
	l := &Lab{topo: topo, dir: "/lab", bin: "/bin", secrets: &Secrets{DBPassword: "s3cret"}}
	ps := l.controlProcs()
	if len(ps) != 3 {
		t.Fatalf("%d control processes", len(ps))
	}
	for i, p := range ps {
		argv := strings.Join(p.Argv, " ")
		if p.Host != ReplicaName(i+1) || !strings.Contains(argv, "--replica-name "+p.Host) ||
			!strings.Contains(argv, "--trusted-proxy 198.51.100.10") || !strings.Contains(argv, "--issuer https://198.51.100.10") {
			t.Errorf("replica %d: %s %s", i+1, p.Host, argv)
		}
		// The database's password goes in the environment, not the
		// command line (which the lab logs).
		if strings.Contains(argv, "s3cret") || len(p.Env) < 1 || !strings.HasPrefix(p.Env[0], "RUNOS_STORE=postgres://postgres:s3cret@198.51.100.5:5432/") {
			t.Errorf("replica %d's store: argv %s, env %v", i+1, argv, p.Env)
		}
	}
	conf := l.haproxyConfText()
	for _, want := range []string{
		"bind 198.51.100.10:443 ssl crt /lab/control/haproxy.pem",
		"http-check send meth GET uri /readyz",
		"timeout server 330s",
		"server control-2 198.51.100.12:443 check observe layer4 error-limit 1 on-error mark-down",
		"option redispatch 1",
		"server control-2-unready 198.51.100.12:443 backup",
		"ca-file /lab/ca.pem verifyhost control.lab.runos",
		"http-request disable-l7-retry unless METH_GET",
		"option forwardfor",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("haproxy.cfg lacks %q:\n%s", want, conf)
		}
	}
}
