//go:build !windows

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/pgtest"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// world is one test's lab.
type world struct {
	t   testing.TB
	lab *lab.Lab
	env *lab.Env
}

// newWorld brings up a lab for this test and removes it when the test
// ends (after printing the end of every log if the test failed).
func newWorld(t testing.TB, clients int, ttl time.Duration) *world {
	t.Helper()
	return newWorldWith(t, lab.Options{Clients: clients, SessionTTL: ttl})
}

// newWorldWith is newWorld with more of the lab's options (Dir and BinDir
// are the test's): its metrics (runos-lab up --metrics), control's store
// and replicas, a UDP block, the relay's recording, daemons and gateways
// on long-polls.
func newWorldWith(t testing.TB, o lab.Options) *world {
	t.Helper()
	netnstest.Require(t, "ip", "unshare", "nsenter", "findmnt", "dnsmasq", "wg", "wireguard-go", "curl")
	if o.Metrics {
		netnstest.Require(t, "prometheus")
	}
	if o.Store == lab.StorePostgres {
		pgtest.Require(t)
		netnstest.Require(t, "haproxy", "setpriv")
	}
	if tt, ok := t.(*testing.T); ok {
		tt.Parallel() // benchmarks run alone, for quieter numbers
	}
	dir := filepath.Join(t.TempDir(), "lab")
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o.Dir, o.BinDir, o.Progress = dir, binDir, &progress
	l, err := lab.Up(ctx, o)
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, progress.String())
	}
	w := &world{t: t, lab: l, env: l.Env()}
	t.Cleanup(func() {
		if t.Failed() {
			w.dumpLogs()
		}
		if err := lab.Down(context.Background(), dir, lab.DownOptions{}); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	return w
}

func (w *world) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(w.env.Dir, "logs", "*.log"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		w.t.Logf("--- %s (end):\n%s", filepath.Base(f), tail(string(b), 40))
	}
}

// run runs argv on a host with extra environment and returns its combined
// output and error (with the output in it).
func (w *world) run(host string, extra []string, argv ...string) (string, error) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, err := w.lab.Command(ctx, host, extra, argv...)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	out := stdout.String()
	if stderr.Len() > 0 {
		out += stderr.String()
	}
	if err != nil {
		return out, fmt.Errorf("on %s: %s: %w\n%s", host, strings.Join(argv, " "), err, out)
	}
	return out, nil
}

// stdout runs argv and returns only what it printed on stdout.
func (w *world) stdout(host string, extra []string, argv ...string) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, err := w.lab.Command(ctx, host, extra, argv...)
	if err != nil {
		w.t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("on %s: %s: %v\n%s%s", host, strings.Join(argv, " "), err, out, stderr.String())
	}
	return string(out)
}

// must is run that fails the test on error.
func (w *world) must(host string, extra []string, argv ...string) string {
	w.t.Helper()
	out, err := w.run(host, extra, argv...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("%s$ %s\n%s", host, strings.Join(argv, " "), out)
	return out
}

// status is `runos vpn status --json` on a laptop, decoded.
func (w *world) status(host string) *localapi.Status {
	w.t.Helper()
	var st localapi.Status
	out := w.stdout(host, nil, "runos", "vpn", "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		w.t.Fatalf("runos vpn status --json on %s: %v\n%s", host, err, out)
	}
	return &st
}

// daemon is a laptop daemon's local API client (its socket from outside).
func (w *world) daemon(host string) *localapi.Client {
	c, ok := w.env.Laptop(host)
	if !ok {
		w.t.Fatalf("no laptop %s", host)
	}
	return localapi.NewClient(c.Socket)
}

// waitStatus waits until ok holds for the laptop daemon's status, read
// through its stream (no polling), or fails after timeout with the last
// status seen.
func (w *world) waitStatus(host string, timeout time.Duration, what string, ok func(*localapi.Status) bool) *localapi.Status {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last *localapi.Status
	for ctx.Err() == nil {
		err := w.daemon(host).Watch(ctx, func(s *localapi.Status) bool {
			last = s
			return !ok(s)
		})
		if err == nil {
			return last
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // the daemon restarting
		}
	}
	b, _ := json.MarshalIndent(last, "", "  ")
	w.t.Fatalf("%s: not %s within %s; last status:\n%s", host, what, timeout, b)
	return nil
}

func cluster(st *localapi.Status, cid string) (localapi.ClusterStatus, bool) {
	for _, c := range st.Clusters {
		if c.CID == cid {
			return c, true
		}
	}
	return localapi.ClusterStatus{}, false
}

// upOn is a predicate: every cid connected with a live handshake, served
// by the given node (if not "").
func upOn(node string, cids ...string) func(*localapi.Status) bool {
	return func(s *localapi.Status) bool {
		for _, cid := range cids {
			c, ok := cluster(s, cid)
			if !ok || c.State != localapi.ClusterConnected || !c.PeerUp || (node != "" && c.Server.NodeID != node) {
				return false
			}
		}
		return true
	}
}

// gatewayPeers lists the peers of a node's WireGuard server, read with
// the stock tool in the node's namespaces ("" when it serves nothing):
// every interface's but the cluster's internal mesh's (the other nodes).
func (w *world) gatewayPeers(host string) string {
	w.t.Helper()
	out, err := w.run(host, nil, "wg", "show", "all", "peers")
	if err != nil {
		w.t.Fatalf("wg show on %s: %v", host, err)
	}
	mesh := map[string]bool{}
	for _, c := range w.env.Clusters {
		if c.Mesh != nil {
			mesh[c.Mesh.Interface] = true
		}
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if iface, _, _ := strings.Cut(line, "\t"); !mesh[iface] {
			b.WriteString(line)
		}
	}
	return b.String()
}

// waitFor polls cond (a read of something with no stream, such as the
// stock wg tool on a node) until it holds or timeout passes.
func (w *world) waitFor(timeout time.Duration, what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("not %s within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// page fetches a URL on a laptop with curl (through whatever route the
// laptop has: wg1 for a cluster's VPN subnet).
func (w *world) page(host, url string) (string, error) {
	return w.run(host, nil, "curl", "-sS", "--max-time", "5", url)
}

// browserStub writes a BROWSER that records each launch in a file and
// opens nothing; it returns the script and the record.
func browserStub(t *testing.T) (script, record string) {
	d := t.TempDir()
	script, record = filepath.Join(d, "browser-stub"), filepath.Join(d, "launches")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" >> "+record+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, record
}

func launches(t *testing.T, record string) []string {
	b, err := os.ReadFile(record)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// pidOf is the recorded PID of a lab program.
func (w *world) pidOf(host, name string) int {
	p, ok := w.lab.Proc(host, name)
	if !ok || !p.Alive() {
		w.t.Fatalf("%s on %s is not running", name, host)
	}
	return p.PID
}

// browserLaunches counts the lab's scripted browser's launches on a laptop.
func (w *world) browserLaunches(host string) int {
	b, err := os.ReadFile(filepath.Join(w.env.Dir, "hosts", host, lab.BrowserLaunches))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}
