package dnsplit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"golang.org/x/sys/unix"
)

// Root tests re-exec this test binary as a "holder": a stand-in daemon that
// runs New and Set inside a namespace, takes orders on stdin and can be
// killed with -9 while it holds a change. Environment:
//
//	RUNOS_DNSPLIT_HELPER   holder | cleanup
//	RUNOS_DNSPLIT_STATE    state directory
//	RUNOS_DNSPLIT_OVERLAY  directory with up/ and work/: mount an overlay on /etc
//	                       first (the holder runs under unshare -m, so only it sees it)
//	RUNOS_DNSPLIT_IFACE    the tunnel stand-in's name
//	RUNOS_DNSPLIT_MODE     Options.Mode
const helperPrefix = "dnsplit-helper: "

func TestDnsplitHelperProcess(t *testing.T) {
	role := os.Getenv("RUNOS_DNSPLIT_HELPER")
	if role == "" {
		return // only does anything re-executed by a root test
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	say := func(format string, a ...any) { fmt.Printf(helperPrefix+format+"\n", a...) }
	state := os.Getenv("RUNOS_DNSPLIT_STATE")
	if role == "cleanup" {
		if err := Cleanup(state, log); err != nil {
			say("err %v", err)
			os.Exit(1)
		}
		say("ok")
		os.Exit(0)
	}
	if d := os.Getenv("RUNOS_DNSPLIT_OVERLAY"); d != "" {
		opts := fmt.Sprintf("lowerdir=/etc,upperdir=%s/up,workdir=%s/work", d, d)
		if err := unix.Mount("overlay", "/etc", "overlay", 0, opts); err != nil {
			say("err mount overlay: %v", err)
			os.Exit(1)
		}
	}
	c, err := New(Options{Interface: os.Getenv("RUNOS_DNSPLIT_IFACE"), StateDir: state, Logger: log, Mode: os.Getenv("RUNOS_DNSPLIT_MODE")})
	if err != nil {
		say("err %v", err)
		os.Exit(1)
	}
	st, _ := json.Marshal(c.Status())
	say("ready %s", st)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		var err error
		switch cmd {
		case "set":
			var routes []Route
			if err = json.Unmarshal([]byte(arg), &routes); err == nil {
				err = c.Set(context.Background(), routes)
			}
		case "status":
			st, _ := json.Marshal(c.Status())
			say("%s", st)
			continue
		case "close":
			err = c.Close()
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			say("err %v", err)
		} else {
			say("ok")
		}
	}
	os.Exit(0)
}

// holder is a running helper process.
type holder struct {
	t    *testing.T
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  chan string
	done chan struct{}
}

// startHolder runs the helper in ns (its network namespace and, through
// `ip netns exec` and `unshare -m`, a mount namespace of its own).
func startHolder(t *testing.T, ns *netnstest.NS, env ...string) *holder {
	t.Helper()
	args := []string{"netns", "exec", ns.Name, "unshare", "-m", "--propagation", "private",
		os.Args[0], "-test.run=^TestDnsplitHelperProcess$"}
	cmd := exec.Command("ip", args...)
	cmd.Env = append(append(os.Environ(), "RUNOS_DNSPLIT_HELPER=holder"), env...)
	cmd.Stderr = testWriter{t}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{t: t, cmd: cmd, in: in, out: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), helperPrefix); ok {
				h.out <- l
			}
		}
		close(h.out)
	}()
	go func() { _ = cmd.Wait(); close(h.done) }()
	t.Cleanup(h.kill)
	if l := h.read(); !strings.HasPrefix(l, "ready ") {
		t.Fatalf("holder did not start: %q", l)
	}
	return h
}

func (h *holder) read() string {
	h.t.Helper()
	select {
	case l, ok := <-h.out:
		if !ok {
			h.t.Fatal("holder exited")
		}
		return l
	case <-time.After(60 * time.Second):
		h.t.Fatal("holder did not answer")
		return ""
	}
}

// do sends one command and returns the reply line.
func (h *holder) do(cmd string, arg any) string {
	h.t.Helper()
	line := cmd
	if arg != nil {
		b, _ := json.Marshal(arg)
		line += " " + string(b)
	}
	if _, err := fmt.Fprintln(h.in, line); err != nil {
		h.t.Fatal(err)
	}
	return h.read()
}

func (h *holder) must(cmd string, arg any) {
	h.t.Helper()
	if r := h.do(cmd, arg); r != "ok" {
		h.t.Fatalf("%s: %s", cmd, r)
	}
}

func (h *holder) status() Status {
	h.t.Helper()
	var st Status
	if err := json.Unmarshal([]byte(h.do("status", nil)), &st); err != nil {
		h.t.Fatal(err)
	}
	return st
}

// kill9 is the crash: SIGKILL, no chance to undo anything.
func (h *holder) kill9() {
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.done
}

func (h *holder) kill() {
	select {
	case <-h.done:
	default:
		h.kill9()
	}
}

// pid is the helper's own PID (ip netns exec and unshare exec in place).
func (h *holder) pid() int { return h.cmd.Process.Pid }

// inHolder runs a command in the holder's network and mount namespaces.
func (h *holder) inHolder(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := append([]string{"-t", fmt.Sprint(h.pid()), "-m", "-n", name}, args...)
	out, err := exec.CommandContext(ctx, "nsenter", a...).CombinedOutput()
	return string(out), err
}

// runCleanup runs Cleanup in a fresh process in ns, as `runos vpnd
// --cleanup` would after a crash.
func runCleanup(t *testing.T, ns *netnstest.NS, state string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := ns.Command(ctx, os.Args[0], "-test.run=^TestDnsplitHelperProcess$")
	cmd.Env = append(os.Environ(), "RUNOS_DNSPLIT_HELPER=cleanup", "RUNOS_DNSPLIT_STATE="+state)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), helperPrefix+"ok") {
		t.Fatalf("cleanup in %s: %v\n%s", ns.Name, err, out)
	}
}

// inNetns runs fn on a thread moved into the named namespace, so sockets it
// opens live there; the thread is thrown away if it cannot be moved back.
func inNetns(t testing.TB, name string, fn func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cur, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer cur.Close()
		target, err := os.Open(filepath.Join("/run/netns", name))
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		fn()
		if err := unix.Setns(int(cur.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err // stay locked: the runtime retires this thread
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in netns %s: %v", name, err)
	}
}

// dnsIn serves b on addr:53 (UDP and TCP) inside the named namespace.
func dnsIn(t testing.TB, nsName, addr string, b serverBehaviour) *testServer {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	var err error
	inNetns(t, nsName, func() {
		if pc, err = net.ListenPacket("udp", net.JoinHostPort(addr, "53")); err != nil {
			return
		}
		ln, err = net.Listen("tcp", net.JoinHostPort(addr, "53"))
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", nsName, err)
	}
	return serveDNS(t, pc, ln, b)
}
