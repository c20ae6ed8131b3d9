//go:build linux

package netnstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// NS is a network namespace made for one test.
type NS struct {
	Name string
	t    testing.TB
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New makes a namespace named "rt<prefix>-<random>" with lo up and deletes
// it (after killing whatever still runs inside) when the test ends.
//
// The namespace gets its own resolv.conf (/etc/netns/<name>/resolv.conf, a
// copy of the machine's, which `ip netns exec` mounts over /etc/resolv.conf
// for every command it runs there): a daemon under test that points the
// resolver at its forwarder then writes that copy, never the machine's
// file. Replacing the machine's file would also detach the bind mounts
// other tests' labs keep over /etc/resolv.conf in their own mount
// namespaces (the kernel detaches mounts on a dentry that is renamed over),
// so one test's daemon could break another's isolation.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	ns := &NS{Name: "rt" + prefix + "-" + suffix(), t: t}
	run(t, "ip", "netns", "add", ns.Name)
	etc := filepath.Join("/etc/netns", ns.Name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "pids", ns.Name).Output(); err == nil {
			for _, p := range strings.Fields(string(out)) {
				// Not the test itself: a thread of it that entered the
				// namespace (the main thread among them) makes
				// `ip netns pids` name this process.
				if p == strconv.Itoa(os.Getpid()) {
					continue
				}
				_ = exec.Command("kill", "-9", p).Run()
			}
		}
		_ = exec.Command("ip", "netns", "del", ns.Name).Run()
		_ = os.RemoveAll(etc)
	})
	resolv, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		resolv = nil // an empty resolver: the namespace has no way out anyway
	}
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatalf("namespace %s: %v", ns.Name, err)
	}
	if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), resolv, 0o644); err != nil {
		t.Fatalf("namespace %s: %v", ns.Name, err)
	}
	ns.MustExec("ip", "link", "set", "lo", "up")
	return ns
}

// Link joins a and b with a veth pair named ifA in a and ifB in b, with the
// given CIDR addresses, both up.
func Link(t testing.TB, a *NS, ifA, addrA string, b *NS, ifB, addrB string) {
	t.Helper()
	tmp := "rtv" + suffix()
	run(t, "ip", "link", "add", tmp+"a", "type", "veth", "peer", "name", tmp+"b")
	run(t, "ip", "link", "set", tmp+"a", "netns", a.Name, "name", ifA)
	run(t, "ip", "link", "set", tmp+"b", "netns", b.Name, "name", ifB)
	a.MustExec("ip", "addr", "add", addrA, "dev", ifA)
	b.MustExec("ip", "addr", "add", addrB, "dev", ifB)
	a.MustExec("ip", "link", "set", ifA, "up")
	b.MustExec("ip", "link", "set", ifB, "up")
}

// Command returns a command that runs inside the namespace.
func (ns *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Exec runs a command inside the namespace and returns its combined output.
func (ns *NS) Exec(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := ns.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), ns.Name, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// MustExec is Exec that fails the test on error.
func (ns *NS) MustExec(name string, args ...string) string {
	ns.t.Helper()
	out, err := ns.Exec(name, args...)
	if err != nil {
		ns.t.Fatal(err)
	}
	return out
}

// Start runs a long-lived command inside the namespace with extra
// environment, logging its output to the test log, and kills its process
// group when the test ends.
func (ns *NS) Start(env []string, name string, args ...string) *exec.Cmd {
	ns.t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w := &logWriter{t: ns.t, prefix: ns.Name + " " + name + ": "}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		ns.t.Fatalf("start %s in %s: %v", name, ns.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	ns.t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return cmd
}

type logWriter struct {
	t      testing.TB
	prefix string
}

func (w *logWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + l)
	}
	return len(p), nil
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}
