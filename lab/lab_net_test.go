//go:build !windows

package lab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func hostRun(t *testing.T, l *Lab, host, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := l.Command(ctx, host, nil, "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("on %s: %s: %v\n%s", host, script, err, out)
	}
	return string(out)
}

// TestTopologyForReal builds the lab's network, mounts, LAN resolver and
// web apps (control, gateways and daemons are other tests' business) and
// checks what every host sees.
func TestTopologyForReal(t *testing.T) {
	t.Parallel()
	l := upNetwork(t, 2)
	env := l.Env()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The LAN resolver: public records, www.example.test, nothing else.
	for name, want := range map[string]string{
		"app.ky3.rjwrn.example.com": "198.51.100.21",
		"ky3.rjwrn.example.com":     "198.51.100.21",
		"k8s.xym.rjwrn.example.com": "198.51.100.31",
		"www.example.test":          "192.0.2.80",
	} {
		got, err := l.Resolve(ctx, "client2", name)
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("resolve %s from client2 = %v, %v; want %s", name, got, err, want)
		}
	}
	if got, err := l.Resolve(ctx, "client", "example.org"); err == nil || !strings.Contains(err.Error(), "NXDOMAIN") {
		t.Errorf("resolve example.org = %v, %v; want NXDOMAIN (the LAN resolver never recurses outward)", got, err)
	}

	// Segments: the laptop reaches ky3-n1 on both, xym-n1 only on the WAN.
	for _, url := range []string{"http://10.77.0.21/", "http://198.51.100.21/"} {
		if body, err := l.Get(ctx, "client", url); err != nil || !strings.Contains(body, "cluster=ky3 node=n1") {
			t.Errorf("GET %s from client = %q, %v", url, body, err)
		}
	}
	if body, err := l.Get(ctx, "client", "http://198.51.100.31/"); err != nil || !strings.Contains(body, "cluster=xym node=n1") {
		t.Errorf("GET xym-n1 from client = %q, %v", body, err)
	}
	if _, err := l.Get(ctx, "xym-n1", "http://10.77.0.21/"); err == nil {
		t.Error("xym-n1 reached the LAN; it is on the WAN only")
	}

	// Private mounts: each host has its own resolv.conf, /run/wireguard and
	// /run/runos; the machine's own are untouched.
	rootResolv, _ := os.ReadFile("/etc/resolv.conf")
	if out := hostRun(t, l, "client", "cat /etc/resolv.conf"); !strings.Contains(out, "nameserver 10.77.0.53") {
		t.Errorf("client's resolv.conf: %q", out)
	}
	hostRun(t, l, "client", "echo lab > /etc/resolv.conf; touch /run/wireguard/t.sock /run/runos/t")
	if out := hostRun(t, l, "client2", "cat /etc/resolv.conf; ls /run/wireguard /run/runos"); strings.Contains(out, "t.sock") || strings.Contains(out, "lab\n") {
		t.Errorf("client2 sees client's private files:\n%s", out)
	}
	if b, _ := os.ReadFile("/etc/resolv.conf"); string(b) != string(rootResolv) {
		t.Errorf("the machine's resolv.conf changed: %q", b)
	}
	if _, err := os.Stat("/run/wireguard/t.sock"); err == nil {
		t.Error("client's /run/wireguard is the machine's")
	}
	if _, err := os.Stat(filepath.Join(env.Dir, "hosts", "client", "wireguard", "t.sock")); err != nil {
		t.Errorf("client's /run/wireguard is not its lab directory: %v", err)
	}
	// The stock tools work inside a host.
	if out := hostRun(t, l, "client", "ip -br addr show wan0; ip -br addr show lan0"); strings.Contains(out, "Error") {
		t.Errorf("ip inside the host: %s", out)
	}

	// Nothing of the lab in the root namespace.
	out, err := exec.Command("ip", "-o", "link").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), l.names.Prefix) {
		t.Errorf("root namespace has lab links:\n%s", out)
	}

	// env.json names every laptop with a socket path outside the lab.
	if len(env.Clients) != 2 || env.Client.Host != "client" || env.Clients[1].Host != "client2" ||
		!strings.HasPrefix(env.Clients[1].Socket, env.Dir) {
		t.Errorf("env clients: %+v", env.Clients)
	}
}

// TestDownRemovesEverything: after down nothing of the lab is left, and
// down again is fine.
func TestDownRemovesEverything(t *testing.T) {
	t.Parallel()
	l := upNetwork(t, 1)
	dir, prefix := l.Dir(), l.names.Prefix
	pids := l.j.snapshot().Procs
	// Every node's wireguard-go (the clusters' mesh) is a recorded process.
	meshes := 0
	for _, p := range pids {
		if p.Name == meshProc && p.Alive() {
			meshes++
		}
	}
	want := 0
	for _, c := range l.topo.Clusters {
		want += len(c.Nodes)
	}
	if meshes != want {
		t.Errorf("%d mesh processes recorded, want one per node (%d)", meshes, want)
	}
	if err := Down(context.Background(), dir, DownOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Down(context.Background(), dir, DownOptions{}); err != nil {
		t.Fatalf("second down: %v", err)
	}
	assertGone(t, dir, prefix, pids)
}

func assertGone(t *testing.T, dir, prefix string, procs []ProcRecord) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		ents, _ := os.ReadDir(dir)
		t.Errorf("lab dir still there: %v %v", err, ents)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), prefix) {
		t.Errorf("namespaces left:\n%s", out)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), dir) {
		t.Errorf("mounts left under %s", dir)
	}
	for _, p := range procs {
		if p.Alive() {
			t.Errorf("process %s[%d] still runs", p.Name, p.PID)
		}
	}
}

// TestDownAfterCrash kills `runos-lab up` itself halfway (SIGKILL: no
// deferred clean-up runs), once it has made namespaces, mounts and started
// processes, and checks that down removes all of it.
func TestDownAfterCrash(t *testing.T) {
	t.Parallel()
	upNetwork(t, 1) // the requirements, and another lab running alongside
	dir := filepath.Join(t.TempDir(), "crash")
	cmd := exec.Command(filepath.Join(binDir, "runos-lab"), "up", "--dir", dir, "--bin", binDir,
		"--skip", "control,gateway,vpnd")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Down(context.Background(), dir, DownOptions{}) })
	var rec *Record
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if r, err := LoadRecord(dir); err == nil && r != nil && len(r.Procs) > 0 {
			rec = r
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if rec == nil {
		t.Fatalf("up never started a process:\n%s", out.String())
	}
	rec, _ = LoadRecord(dir)
	if rec.Ready || len(rec.Netns) == 0 || len(rec.Mounts) == 0 {
		t.Fatalf("killed too late or too early: %+v", rec)
	}
	t.Logf("killed up with %d namespaces, %d mounts, %d processes", len(rec.Netns), len(rec.Mounts), len(rec.Procs))
	if err := Down(context.Background(), dir, DownOptions{}); err != nil {
		t.Fatal(err)
	}
	assertGone(t, dir, NamesFor(dir).Prefix, rec.Procs)
}
