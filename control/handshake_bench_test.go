//go:build linux

package control

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/internal/proccpu"
	"github.com/runos/vpn/internal/testcert"
	"github.com/runos/vpn/internal/testenv"
)

// BenchmarkTLSHandshake is what a failover costs per device before control
// does anything of its own (issue 25): each device of a dead replica opens
// a new TLS connection to a survivor. The server is control's own TLS
// configuration (loadTLS, a P-256 certificate as the lab's) in a process of
// its own, so that its CPU and the clients' are counted apart; the clients
// are Go's defaults, as the daemon's and the gateway's (X25519MLKEM768 key
// exchange in Go 1.26). Sub-benchmarks: a full handshake, and one resumed
// from a session ticket of the same server (what a client session cache
// would save if the replicas shared their ticket keys), and a full one
// with X25519 alone (what the post-quantum part of the key exchange
// costs; control does not turn it off).
//
//	go test -run='^$' -bench=BenchmarkTLSHandshake -benchtime=3000x ./control/
//
// Metrics per handshake: server-cpu-us (the server process's user+system
// time), client-cpu-us (this process's).
func BenchmarkTLSHandshake(b *testing.B) {
	dir := b.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	tc := testcert.New(b)
	tc.Write(b, certFile, keyFile)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(tc.CertPEM)

	self, _ := os.Executable()
	srv := exec.Command(self, "-test.run=^TestTLSHandshakeServer$")
	srv.Env = append(os.Environ(), "RUNOS_TLSBENCH_CERT="+certFile+","+keyFile)
	srv.Stderr = os.Stderr
	out, err := srv.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		b.Fatalf("handshake server: %q, %v", line, err)
	}

	for _, v := range []struct {
		name             string
		resumed, classic bool
	}{{name: "full"}, {name: "resumed", resumed: true}, {name: "full-x25519", classic: true}} {
		resumed := v.resumed
		b.Run(v.name, func(b *testing.B) {
			cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
			if v.classic {
				cfg.CurvePreferences = []tls.CurveID{tls.X25519}
			}
			if resumed {
				cfg.ClientSessionCache = tls.NewLRUClientSessionCache(64)
				if err := handshakeOnce(addr, cfg, false); err != nil { // the ticket
					b.Fatal(err)
				}
			}
			s0, c0 := proccpu.Of(srv.Process.Pid), proccpu.Self()
			b.ResetTimer()
			// 32 at a time, as a failover's devices arrive together.
			var wg sync.WaitGroup
			var mu sync.Mutex
			var first error
			next := make(chan struct{})
			for range 32 {
				wg.Go(func() {
					for range next {
						if err := handshakeOnce(addr, cfg, resumed); err != nil {
							mu.Lock()
							first = err
							mu.Unlock()
						}
					}
				})
			}
			for range b.N {
				next <- struct{}{}
			}
			close(next)
			wg.Wait()
			b.StopTimer()
			if first != nil {
				b.Fatal(first)
			}
			n := float64(b.N)
			b.ReportMetric(float64(proccpu.Of(srv.Process.Pid)-s0)/float64(time.Microsecond)/n, "server-cpu-us")
			b.ReportMetric(float64(proccpu.Self()-c0)/float64(time.Microsecond)/n, "client-cpu-us")
		})
	}
}

// handshakeOnce connects, completes the handshake, reads the server's one
// byte (which also takes in a TLS 1.3 session ticket) and hangs up.
func handshakeOnce(addr string, cfg *tls.Config, wantResumed bool) error {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	var one [1]byte
	if _, err := c.Read(one[:]); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if wantResumed && !c.ConnectionState().DidResume {
		return fmt.Errorf("handshake not resumed")
	}
	_, err = c.Write(one[:])
	return err
}

// TestTLSHandshakeServer is BenchmarkTLSHandshake's server process: control's
// TLS configuration on a loopback port; each connection gets one byte after
// the handshake and is closed once the client answers.
func TestTLSHandshakeServer(t *testing.T) {
	files := testenv.OnlyAsHelper(t, "RUNOS_TLSBENCH_CERT", "BenchmarkTLSHandshake's own process")
	certFile, keyFile, _ := strings.Cut(files, ",")
	cfg, err := loadTLS(Config{TLSCert: certFile, TLSKey: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("listening", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer c.Close()
			var one [1]byte
			if _, err := c.Write([]byte{'x'}); err == nil {
				_, _ = c.Read(one[:])
			}
		}()
	}
}
