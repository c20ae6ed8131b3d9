//go:build linux

package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/seed"
	"github.com/runos/vpn/control/store/sqlstore"
	"github.com/runos/vpn/internal/pgtest"
	"github.com/runos/vpn/internal/testcert"
)

// replicaWorld is control as separate replica processes
// (TestFanOutReplicaHelper) on one PostgreSQL database holding n
// signed-in devices joined to ky3, served by n1: what
// BenchmarkMoveFanOutReplicas measures and the fan-out fault tests
// (fanout_faults_test.go) break. The devices themselves are started
// apart (startDeviceHelpers) with w.tokens.
type replicaWorld struct {
	tb       testing.TB
	dir      string
	dbURL    string
	certFile string
	keyFile  string
	caFile   string
	reps     []*replicaProc
	urls     []string
	op       *api.Client
	hc       *http.Client
	nodeKeys map[string]wgtypes.Key
	tokens   []string // "token deviceID" per device
	keys     []string // the devices' public keys
}

// replicaProc is one replica's process and its stdin/stdout protocol.
type replicaProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
	url   string
}

func newReplicaWorld(tb testing.TB, pg *pgtest.Server, replicas, n int) *replicaWorld {
	ctx := context.Background()
	w := &replicaWorld{tb: tb, dir: tb.TempDir(), dbURL: pg.NewDatabase(tb),
		nodeKeys: map[string]wgtypes.Key{"n1": mustKey(tb), "n2": mustKey(tb)}}
	st, err := sqlstore.OpenPostgres(ctx, w.dbURL, sqlstore.Options{AppName: "bench"})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	services, _ := pool.NewServices(netip.MustParsePrefix("100.100.0.0/16"))
	if _, err := seed.Import(ctx, st, testWorld(), seed.Options{Services: services, BcryptCost: 4, Now: time.Now()}); err != nil {
		tb.Fatal(err)
	}
	w.tokens, w.keys = bulkDevices(tb, st, n)

	tc := testcert.New(tb)
	w.caFile = filepath.Join(w.dir, "ca.pem")
	if err := os.WriteFile(w.caFile, tc.CertPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	w.certFile, w.keyFile = filepath.Join(w.dir, "cert.pem"), filepath.Join(w.dir, "key.pem")
	tc.Write(tb, w.certFile, w.keyFile)

	tb.Cleanup(w.close)
	w.reps = make([]*replicaProc, replicas)
	for k := range w.reps {
		w.reps[k] = w.start(k, "127.0.0.1:0")
		w.urls = append(w.urls, w.reps[k].url)
	}
	w.hc = tc.Client()
	w.op = &api.Client{BaseURL: w.urls[0], Token: opToken, HTTP: w.hc}
	return w
}

// start runs replica k (0-based, named r<k+1>) listening on addr.
func (w *replicaWorld) start(k int, addr string) *replicaProc {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFanOutReplicaHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "RUNOS_FANOUT_REPLICA=1", "RUNOS_FANOUT_STORE="+w.dbURL, "RUNOS_FANOUT_ADDR="+addr,
		"RUNOS_FANOUT_CERT="+w.certFile, "RUNOS_FANOUT_KEY="+w.keyFile, fmt.Sprintf("RUNOS_FANOUT_NAME=r%d", k+1))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		w.tb.Fatal(err)
	}
	r := &replicaProc{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	f := expectLine(w.tb, r.lines, "listening")
	r.url = "https://" + f[0]
	return r
}

// kill ends replica k with SIGKILL and reaps it; restart starts it again
// on its address.
func (w *replicaWorld) kill(k int) time.Time {
	killed := time.Now()
	w.reps[k].cmd.Process.Kill()
	w.reps[k].cmd.Wait()
	return killed
}

func (w *replicaWorld) restart(k int) {
	w.reps[k] = w.start(k, w.urls[k][len("https://"):])
}

func (w *replicaWorld) close() {
	for _, r := range w.reps {
		if r == nil {
			continue
		}
		r.in.Close()
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// ask sends a line to replica k and returns its answer's fields.
func (w *replicaWorld) ask(k int, what string) []string {
	fmt.Fprintln(w.reps[k].in, what)
	return expectLine(w.tb, w.reps[k].lines, what)
}

// gateway is node nid's gateway of ky3, talking to replica 1.
func (w *replicaWorld) gateway(nid string) *api.Client {
	return &api.Client{BaseURL: w.urls[0], Token: enroll("ky3", nid), HTTP: w.hc}
}

// report is node nid's gateway report: listening, having applied
// mapVersion, with the handshakes hs.
func (w *replicaWorld) report(nid string, mapVersion uint64, hs []api.PeerHandshake) {
	w.tb.Helper()
	if err := w.gateway(nid).GatewayReport(context.Background(), api.GatewayReport{PublicKey: w.nodeKeys[nid].PublicKey().String(),
		Version: "bench", ServiceID: "wg-ky3", Listening: true, ListenPort: 32768, MapVersion: mapVersion, Handshakes: hs}); err != nil {
		w.tb.Fatal(err)
	}
}

// handshakes is a handshake of every device, now.
func (w *replicaWorld) handshakes() []api.PeerHandshake {
	hs := make([]api.PeerHandshake, 0, len(w.keys))
	now := time.Now()
	for _, k := range w.keys {
		hs = append(hs, api.PeerHandshake{PublicKey: k, At: now})
	}
	return hs
}

// watchers is the long-polls and streams replica k holds.
func (w *replicaWorld) watchers(k int) int {
	n, _ := strconv.Atoi(w.ask(k, "watchers")[0])
	return n
}

// waitHeld waits until the replicas not in skip hold a poll or stream of
// every device: at most 2 minutes, or 10 ms a device (100,000 took over
// ten minutes to connect on a saturated machine).
func (w *replicaWorld) waitHeld(skip ...int) {
	w.tb.Helper()
	bound := max(2*time.Minute, time.Duration(len(w.tokens))*10*time.Millisecond)
	deadline := time.Now().Add(bound)
	for {
		total := 0
		for k := range w.reps {
			if !slices.Contains(skip, k) {
				total += w.watchers(k)
			}
		}
		if total >= len(w.tokens) {
			return
		}
		if time.Now().After(deadline) {
			w.tb.Fatalf("after %s the replicas hold %d of %d devices' polls", bound, total, len(w.tokens))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dyingListener's connections count their writes once armed (left > 0)
// and kill the process just before the last of them: a replica that dies
// in the middle of a fan-out's writes, some of its streams written and
// the rest not (TestFanOutReplicaKilledMidWrite).
type dyingListener struct {
	net.Listener
	left atomic.Int64
}

func (l *dyingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &dyingConn{Conn: c, l: l}, nil
}

type dyingConn struct {
	net.Conn
	l *dyingListener
}

func (c *dyingConn) Write(p []byte) (int, error) {
	if c.l.left.Load() > 0 && c.l.left.Add(-1) == 0 {
		fmt.Println("dying")
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	return c.Conn.Write(p)
}
