//go:build !windows

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// TestPolicyRefusesJoin: an operator sets a policy with the CLI that lets
// everyone connect to ky3 and only group oncall to xym; the lab's user,
// in no group, stays on ky3 and `runos vpn connect xym` says why not;
// `runos policy test` answers with its exit status; once the user is added
// to oncall, xym connects. The refusal is in the audit log.
func TestPolicyRefusesJoin(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop, user := w.env.Client.Host, w.env.User
	op := []string{"RUNOS_TOKEN=" + w.env.OperatorToken}

	w.must(laptop, op, "runos", "groups", "create", "oncall")
	file := filepath.Join(w.env.Dir, "policy.txt")
	doc := "version 1\nallow * -> ky3: *\nallow group:oncall -> xym: *\n"
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	w.must(laptop, op, "runos", "policy", "set", file)

	exit := func(argv ...string) int {
		t.Helper()
		out, err := w.run(laptop, op, argv...)
		t.Logf("%s$ %s\n%s", laptop, strings.Join(argv, " "), out)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if code := exit("runos", "policy", "test", "--user", user, "--to", "ky3"); code != 0 {
		t.Errorf("policy test --to ky3: exit %d, want 0 (allow)", code)
	}
	if code := exit("runos", "policy", "test", "--user", user, "--to", "xym"); code != 1 {
		t.Errorf("policy test --to xym: exit %d, want 1 (deny)", code)
	}

	start := w.lastAuditID()
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("", "ky3"))
	out, err := w.run(laptop, nil, "runos", "vpn", "connect", "xym")
	t.Logf("%s$ runos vpn connect xym (refused)\n%s", laptop, out)
	if err == nil || !strings.Contains(out, "connect xym: the access policy of account") ||
		!strings.Contains(out, "does not let "+user+" (in no group) connect to xym") ||
		!strings.Contains(out, "add you to a group that may connect to xym") {
		t.Fatalf("connect xym under a policy that refuses it: %v\n%s", err, out)
	}
	var refused []api.AuditEntry
	for _, e := range w.auditSince(start) {
		if e.Kind == api.AuditJoinRefused {
			refused = append(refused, e)
		}
	}
	if len(refused) != 1 || refused[0].CID != "xym" || refused[0].Actor != user {
		t.Errorf("join.refused entries: %+v", refused)
	}

	// In the group, the same command connects.
	w.must(laptop, op, "runos", "groups", "add", "oncall", user)
	if code := exit("runos", "policy", "test", "--user", user, "--to", "xym"); code != 0 {
		t.Errorf("policy test --to xym as a member of oncall: exit %d, want 0", code)
	}
	w.must(laptop, nil, "runos", "vpn", "connect", "xym")
	w.waitStatus(laptop, 30*time.Second, "connected to ky3 and xym", upOn("", "ky3", "xym"))
}

// TestPolicyFiltersPackets: the gateway enforces the policy on every
// packet. Connected to ky3, the laptop downloads from the VPN node's web
// app; a policy that lets the user connect to ky3 but reach only a
// database elsewhere cuts the live download within a second and refuses
// new fetches, while the cluster's names still resolve through the VPN
// server's DNS; a rule for everything in ky3 lets it through again.
func TestPolicyFiltersPackets(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	op := []string{"RUNOS_TOKEN=" + w.env.OperatorToken}
	ky3, _ := w.env.Cluster("ky3")

	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("", "ky3"))
	c, _ := cluster(st, "ky3")
	url := "http://" + c.Server.Address + "/"
	fetch := func() error {
		_, err := w.run(laptop, nil, "curl", "-sS", "--max-time", "1", url)
		return err
	}
	if err := fetch(); err != nil {
		t.Fatalf("the page before any policy: %v", err)
	}

	set := func(doc string) time.Time {
		t.Helper()
		file := filepath.Join(w.env.Dir, "policy.txt")
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		w.must(laptop, op, "runos", "policy", "set", file)
		return at
	}
	// A live download from the laptop, read slowly through a small
	// receive buffer so that it lasts minutes and little is queued.
	dl := w.liveDownload(c.Server.Address + ":80")
	w.waitFor(10*time.Second, "the download under way", func() bool { return dl.total.Load() > 64<<10 })

	at := set("version 1\nallow * -> ky3: 10.96.0.20:5432\n")
	select {
	case err := <-dl.done:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("the live download ended with %v, want a read timing out", err)
		}
		lastByte := time.Unix(0, dl.last.Load()).Sub(at)
		t.Logf("policy set → the live download's last byte after %v", lastByte)
		if lastByte > time.Second {
			t.Errorf("the live download still got bytes %v after the policy was set, want under 1s", lastByte)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the live download still runs 15 s after the policy refused it")
	}
	if err := fetch(); err == nil {
		t.Error("a new fetch of the page went through under a policy refusing it")
	}
	name := "api." + ky3.Domain
	if got := w.getent(laptop, name); got != c.Server.Address {
		t.Errorf("%s resolves to %q under the policy, want %s (the VPN server's DNS is always allowed)", name, got, c.Server.Address)
	}

	set("version 2\nallow * -> ky3: *\n")
	w.waitFor(10*time.Second, "the page allowed again", func() bool { return fetch() == nil })
}

// download is a GET of the lab web app's /bytes/ read at a steady pace.
type download struct {
	total atomic.Int64
	last  atomic.Int64 // unix nanoseconds of the last byte
	done  chan error   // the read that ended it: a timeout once nothing comes for 2 s
}

// liveDownload starts a 64 MiB download from addr on the laptop, read 4 KiB
// every 10 ms through an 8 KiB receive buffer: it lasts minutes, and once
// packets from the laptop are dropped its bytes stop within moments.
func (w *world) liveDownload(addr string) *download {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := w.lab.Dial(ctx, w.env.Client.Host, "tcp", addr)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { conn.Close() })
	if rb, ok := conn.(interface{ SetReadBuffer(int) error }); ok {
		_ = rb.SetReadBuffer(8 << 10)
	}
	if _, err := fmt.Fprintf(conn, "GET /bytes/67108864 HTTP/1.1\r\nHost: lab\r\n\r\n"); err != nil {
		w.t.Fatal(err)
	}
	d := &download{done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4<<10)
		pace := time.NewTicker(10 * time.Millisecond)
		defer pace.Stop()
		for range pace.C {
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, err := conn.Read(buf)
			if n > 0 {
				d.total.Add(int64(n))
				d.last.Store(time.Now().UnixNano())
			}
			if err != nil {
				d.done <- err
				return
			}
		}
	}()
	return d
}

// TestPolicyInsideCluster: rules name addresses inside the cluster. A
// policy letting everyone reach ky3's web Service on port 80 and nothing
// else there lets it through by its raw and its mapped address (the mapped
// one checked as the address it stands for), and refuses the pod behind it
// on 8080 and another node.
func TestPolicyInsideCluster(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	op := []string{"RUNOS_TOKEN=" + w.env.OperatorToken}
	ky3, _ := w.env.Cluster("ky3")
	svc := ky3.Services[0]

	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	r := w.reachOf(laptop, "ky3")
	file := filepath.Join(w.env.Dir, "policy.txt")
	if err := os.WriteFile(file, []byte("version 1\nallow * -> ky3: "+svc.ClusterIP+":80\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.must(laptop, op, "runos", "policy", "set", file)

	for url, allowed := range map[string]bool{
		"http://" + svc.ClusterIP + "/":                    true,
		mappedURL(t, r["ky3"].Mapped, svc.ClusterIP, "80"): true,
		"http://" + svc.PodIP + ":8080/":                   false,
		"http://" + ky3.Nodes[1].InternalIP + "/":          false,
	} {
		body, err := w.run(laptop, nil, "curl", "-sS", "--max-time", "2", url)
		switch {
		case allowed && (err != nil || !strings.Contains(body, svc.Body)):
			t.Errorf("GET %s under the policy = %q, %v; want %q", url, body, err, svc.Body)
		case !allowed && err == nil:
			t.Errorf("GET %s under the policy answered %q; want it refused", url, body)
		}
	}
}
