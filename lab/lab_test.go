//go:build !windows

package lab

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

func TestDefaultTopology(t *testing.T) {
	topo, err := DefaultTopology(3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"control", "lan", "idp", "ky3-n1", "ky3-n2", "xym-n1", "client", "client2", "client3"}
	if got := (&Lab{topo: topo}).HostNames(); !slices.Equal(got, want) {
		t.Errorf("hosts = %v, want %v", got, want)
	}
	seen := map[netip.Addr]string{}
	for i, h := range topo.Hosts {
		for seg, a := range h.Addrs {
			if other, dup := seen[a]; dup {
				t.Errorf("%s and %s share %s", h.Name, other, a)
			}
			seen[a] = h.Name
			p := map[string]netip.Prefix{WAN: wanPrefix, LAN: lanPrefix}[seg]
			if !p.Contains(a) {
				t.Errorf("%s: %s not in %s", h.Name, a, p)
			}
			if n := SwitchPort(h.Name, i, seg); len(n) > 15 {
				t.Errorf("switch port %q longer than 15", n)
			}
		}
	}
	n1, _ := topo.Host("ky3-n1")
	if n1.Addrs[LAN] != netip.MustParseAddr("10.77.0.21") || n1.Addrs[WAN] != netip.MustParseAddr("198.51.100.21") {
		t.Errorf("ky3-n1 addresses: %v", n1.Addrs)
	}
	if x, _ := topo.Host("xym-n1"); len(x.Addrs) != 1 {
		t.Errorf("xym-n1 must be on the WAN only: %v", x.Addrs)
	}
	if topo.Domain("ky3") != "ky3.rjwrn.example.com" {
		t.Error(topo.Domain("ky3"))
	}
	for _, n := range []int{0, -1, MaxClients + 1} {
		if _, err := DefaultTopology(n); err == nil {
			t.Errorf("DefaultTopology(%d) accepted", n)
		}
	}
	long, _ := DefaultTopology(MaxClients)
	for i, h := range long.Hosts {
		if n := SwitchPort(h.Name, i, WAN); len(n) > 15 {
			t.Errorf("switch port %q too long", n)
		}
	}
}

func TestNamesPerDirectory(t *testing.T) {
	a, b := NamesFor("/tmp/lab-a"), NamesFor("/tmp/lab-b")
	if a == b {
		t.Error("two directories, one prefix")
	}
	if NamesFor("/tmp/lab-a/") != a || NamesFor("/tmp/../tmp/lab-a") != a {
		t.Error("the same directory spelled differently gets another prefix")
	}
	if len(a.Prefix) != 8 || !strings.HasPrefix(a.Netns("client"), a.Prefix+"-") {
		t.Errorf("names: %q %q", a.Prefix, a.Netns("client"))
	}
}

func TestWorldFile(t *testing.T) {
	topo, _ := DefaultTopology(1)
	s, err := NewSecrets(topo, bytes.NewReader(bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 100)))
	if err != nil {
		t.Fatal(err)
	}
	w := topo.World(s)
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var back api.World
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Clusters) != 2 || back.Accounts[0].AID != "rjwrn" || back.Accounts[0].OperatorToken == "" {
		t.Fatalf("world: %s", b)
	}
	if u := back.Users[0]; u.Password != s.Password || u.PasswordHash != "" || !slices.Equal(u.Accounts, []string{"rjwrn"}) {
		t.Errorf("user: %+v", u)
	}
	tokens := map[string]bool{}
	for _, c := range back.Clusters {
		if err := api.CheckCID(c.CID); err != nil {
			t.Error(err)
		}
		if c.VPNService == nil || c.VPNService.NodeID != "n1" || c.VPNService.Port != 32768 {
			t.Errorf("%s VPN service: %+v", c.CID, c.VPNService)
		}
		for _, n := range c.Nodes {
			if n.EnrollmentToken == "" || tokens[n.EnrollmentToken] {
				t.Errorf("%s/%s enrollment token empty or reused", c.CID, n.NID)
			}
			tokens[n.EnrollmentToken] = true
			if _, err := netip.ParseAddr(n.PublicIP); err != nil {
				t.Errorf("%s/%s public IP: %v", c.CID, n.NID, err)
			}
		}
	}
	ky3 := back.Clusters[0]
	if ky3.CID != "ky3" || ky3.Nodes[0].IngressIP != "10.77.0.21" || !ky3.Nodes[0].Published ||
		ky3.Nodes[1].IngressIP != "" || ky3.Nodes[1].PublicIP != "198.51.100.22" {
		t.Errorf("ky3: %+v", ky3)
	}
	// Every lab draws its own.
	s2, _ := RandomSecrets(topo)
	s3, _ := RandomSecrets(topo)
	if s2.Password == s3.Password || s2.OperatorToken == s3.OperatorToken {
		t.Error("two labs share secrets")
	}
}

func TestPKI(t *testing.T) {
	ip := netip.MustParseAddr("198.51.100.10")
	now := time.Now()
	p, err := NewPKI(ip, now)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CAPEM) {
		t.Fatal("CA PEM")
	}
	blk, _ := pem.Decode(p.CertPEM)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now}); err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("198.51.100.10"); err != nil {
		t.Error(err)
	}
	if err := leaf.VerifyHostname("198.51.100.11"); err == nil {
		t.Error("certificate valid for another address")
	}
	// The key pairs with the certificate and serves TLS.
	srv := httptest.NewUnstartedServer(nil)
	cert, err := tlsPair(p)
	if err != nil {
		t.Fatal(err)
	}
	_ = cert
	srv.Close()
}

func TestDnsmasqConfig(t *testing.T) {
	topo, _ := DefaultTopology(1)
	l := &Lab{topo: topo, dir: "/x"}
	conf := l.dnsmasqConfText()
	for _, want := range []string{
		"no-resolv\n", "listen-address=10.77.0.53\n", "address=/www.example.test/192.0.2.80\n",
		"address=/ky3.rjwrn.example.com/198.51.100.21\n", "address=/xym.rjwrn.example.com/198.51.100.31\n",
		"local=/#/\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("dnsmasq.conf lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "server=") {
		t.Errorf("dnsmasq.conf forwards somewhere:\n%s", conf)
	}
}

func TestHostEnv(t *testing.T) {
	topo, _ := DefaultTopology(1)
	l := &Lab{topo: topo, dir: "/lab", bin: "/proj/bin"}
	t.Setenv("BROWSER", "firefox")
	t.Setenv("RUNOS_API_URL", "https://elsewhere")
	env := l.HostEnv("client")
	get := func(env []string, k string) []string {
		var vs []string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				vs = append(vs, v)
			}
		}
		return vs
	}
	if v := get(env, "BROWSER"); !slices.Equal(v, []string{"/lab/hosts/client/browser"}) {
		t.Errorf("BROWSER = %v", v)
	}
	if v := get(env, "RUNOS_API_URL"); !slices.Equal(v, []string{"https://198.51.100.10"}) {
		t.Errorf("RUNOS_API_URL = %v", v)
	}
	if v := get(env, "PATH"); len(v) != 1 || !strings.HasPrefix(v[0], "/proj/bin:") {
		t.Errorf("PATH = %v", v)
	}
	if v := get(env, "RUNOS_VPND_SOCKET"); !slices.Equal(v, []string{"/run/runos/vpnd.sock"}) {
		t.Errorf("RUNOS_VPND_SOCKET = %v", v)
	}
	// The daemon's state directory, for it and for `runos vpnd --cleanup`.
	if v := get(env, "RUNOS_VPND_STATE_DIR"); !slices.Equal(v, []string{"/lab/hosts/client/state"}) {
		t.Errorf("RUNOS_VPND_STATE_DIR = %v", v)
	}
	if d := l.daemonProc("client"); slices.Contains(d.Argv, "--state-dir") {
		t.Errorf("the daemon's state directory is given by flag, not by the environment a clean-up shares: %q", d.Argv)
	}
	for _, k := range []string{"BROWSER", "RUNOS_VPND_STATE_DIR"} {
		if v := get(l.HostEnv("ky3-n1"), k); v != nil {
			t.Errorf("a node has %s %v", k, v)
		}
	}
	over := overrideEnv(env, []string{"BROWSER=/stub"})
	if v := get(over, "BROWSER"); !slices.Equal(v, []string{"/stub"}) {
		t.Errorf("override: %v", v)
	}
	if _, err := l.Command(context.Background(), "nosuch", nil, "true"); err == nil || !strings.Contains(err.Error(), "hosts: control") {
		t.Errorf("unknown host: %v", err)
	}
}

func TestClaimDir(t *testing.T) {
	d := t.TempDir()
	if err := claimDir(filepath.Join(d, "new")); err != nil {
		t.Error(err)
	}
	os.WriteFile(filepath.Join(d, "other"), nil, 0o600)
	if err := claimDir(d); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("non-empty dir: %v", err)
	}
	lab := t.TempDir()
	os.WriteFile(filepath.Join(lab, RecordFile), []byte("{}"), 0o600)
	if err := claimDir(lab); err == nil || !strings.Contains(err.Error(), "runos-lab down") {
		t.Errorf("dir with a lab: %v", err)
	}
}

// fakeRunner records commands and answers `ip netns list` with list and
// `ip netns pids` with pids.
type fakeRunner struct {
	cmds []string
	list string
	pids string
}

func (f *fakeRunner) Run(_ context.Context, name string, args ...string) (string, error) {
	line := name + " " + strings.Join(args, " ")
	f.cmds = append(f.cmds, line)
	switch {
	case line == "ip netns list":
		return f.list, nil
	case strings.HasPrefix(line, "ip netns pids "):
		return f.pids, nil
	}
	return "", nil
}

// TestDownSparesItsOwnProcess: a thread of this process inside one of the
// lab's namespaces (a test dialling the laptop's daemon through dialIn)
// makes `ip netns pids` name this process; down kills what else runs
// there, never its caller (were it to, this test would die of SIGKILL).
func TestDownSparesItsOwnProcess(t *testing.T) {
	d := t.TempDir()
	j, err := newJournal(d, NamesFor(d).Prefix, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	j.netns(NamesFor(d).Netns("client"))
	r := &fakeRunner{pids: strconv.Itoa(os.Getpid()) + "\n"}
	if err := Down(context.Background(), d, DownOptions{Runner: r}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.cmds, "ip netns pids "+NamesFor(d).Netns("client")) {
		t.Errorf("down did not look for what runs in the namespace: %q", r.cmds)
	}
}

func TestDownWithoutLab(t *testing.T) {
	d := t.TempDir()
	r := &fakeRunner{list: "other-ns (id: 3)\n"}
	if err := Down(context.Background(), d, DownOptions{Runner: r}); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.cmds {
		if strings.Contains(c, "del") {
			t.Errorf("down of no lab ran %q", c)
		}
	}
	if _, err := os.Stat(d); !os.IsNotExist(err) {
		t.Error("an empty lab directory stays after down")
	}
}

func TestDownFromRecordOnly(t *testing.T) {
	d := t.TempDir()
	j, err := newJournal(d, NamesFor(d).Prefix, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(d, "hosts", "client"), 0o755)
	os.WriteFile(filepath.Join(d, "keep-me"), []byte("not the lab's"), 0o600)
	j.file("hosts")
	j.netns(NamesFor(d).Netns("client"))
	// A process that is not alive (a recycled PID must never be killed).
	j.proc(ProcRecord{Name: "vpnd", Host: "client", PID: os.Getpid(), Start: 1})
	r := &fakeRunner{}
	if err := Down(context.Background(), d, DownOptions{Runner: r}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "hosts")); !os.IsNotExist(err) {
		t.Error("hosts/ left")
	}
	if _, err := os.Stat(filepath.Join(d, "keep-me")); err != nil {
		t.Error("down removed a file the lab did not make")
	}
	if _, err := os.Stat(filepath.Join(d, RecordFile)); !os.IsNotExist(err) {
		t.Error("lab.json left after a clean down")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	d := t.TempDir()
	j, err := newJournal(d, "rl000000", time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	j.netns("rl000000-sw")
	j.mount("/x/ns")
	j.proc(ProcRecord{Name: "control", Host: "control", PID: 1234, Start: 99})
	j.dropProc(1234)
	j.proc(ProcRecord{Name: "gateway", Host: "ky3-n1", PID: 4321, Start: 98})
	r, err := LoadRecord(d)
	if err != nil {
		t.Fatal(err)
	}
	if r.Prefix != "rl000000" || len(r.Netns) != 1 || len(r.Mounts) != 1 || len(r.Procs) != 1 || r.Procs[0].PID != 4321 {
		t.Errorf("record: %+v", r)
	}
	if fi, _ := os.Stat(filepath.Join(d, RecordFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("lab.json mode %v", fi.Mode())
	}
	if r, err := LoadRecord(t.TempDir()); r != nil || err != nil {
		t.Errorf("no lab: %v %v", r, err)
	}
}

func TestProcStart(t *testing.T) {
	me := ProcRecord{PID: os.Getpid(), Start: procStart(os.Getpid())}
	if me.Start == 0 || !me.Alive() {
		t.Fatalf("this process: %+v", me)
	}
	me.Start++
	if me.Alive() {
		t.Error("a different start time counts as alive")
	}
	if procStart(1<<30) != 0 {
		t.Error("a missing process has a start time")
	}
}

func TestWebApp(t *testing.T) {
	srv := httptest.NewServer(WebApp("ky3", "n2"))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if !strings.Contains(b.String(), "cluster=ky3 node=n2") {
		t.Errorf("body %q", b.String())
	}
}

func TestParseEnv(t *testing.T) {
	e := &Env{APIURL: "https://198.51.100.10", Hosts: []EnvHost{{Name: "client"}},
		Clusters: []EnvCluster{{CID: "ky3"}}, Clients: []EnvClient{{Host: "client"}}}
	b, _ := json.Marshal(e)
	got, err := ParseEnv(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Cluster("ky3"); !ok {
		t.Error("Cluster")
	}
	if _, ok := got.Laptop("client"); !ok {
		t.Error("Laptop")
	}
	if _, ok := got.Host("client"); !ok {
		t.Error("Host")
	}
	for _, bad := range []string{"", "{", "{}", `{"apiUrl":"x"}`} {
		if _, err := ParseEnv([]byte(bad)); err == nil {
			t.Errorf("ParseEnv(%q) accepted", bad)
		}
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"dir":"/x","prefix":"rl000000","netns":["a"],"procs":[{"name":"c","pid":7,"start":1}]}`))
	f.Add([]byte(`{"procs":[{"pid":1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRecord(b)
		if err != nil {
			return
		}
		for _, p := range r.Procs {
			if p.PID <= 1 {
				t.Fatalf("accepted pid %d: down would signal it", p.PID)
			}
		}
	})
}

func FuzzParseEnv(f *testing.F) {
	f.Add([]byte(`{"apiUrl":"https://198.51.100.10","hosts":[{"name":"client"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEnv(b)
		if err != nil {
			return
		}
		if e.APIURL == "" || len(e.Hosts) == 0 {
			t.Fatal("accepted an incomplete env.json")
		}
		_, _ = e.Cluster("ky3")
		_, _ = e.Laptop("client")
	})
}
