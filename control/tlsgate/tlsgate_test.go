package tlsgate

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runos/vpn/internal/testcert"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func clientConfig(tc testcert.Cert) *tls.Config {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(tc.CertPEM)
	return &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
}

// waitFor waits until cond holds (observable state of the gate), failing
// the test after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// serveEcho accepts from l and echoes each connection until it closes.
func serveEcho(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}

// TestBoundHoldsUnderManyClients: 60 clients handshake at once through a
// gate of 3 slots; the server's side of each handshake is held, inside
// its certificate lookup (mid-computation), until the test lets one go at
// a time. Never more than 3 are inside, the other 57 are counted waiting
// once their ClientHellos are in, and every client ends up handshaken and
// served.
func TestBoundHoldsUnderManyClients(t *testing.T) {
	const clients, slots = 60, 3
	tc := testcert.New(t)
	cert := tc.TLS(t)
	var cur, peak atomic.Int64
	entered := make(chan struct{}, clients)
	release := make(chan struct{})
	cfg := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		entered <- struct{}{}
		<-release
		cur.Add(-1)
		return &cert, nil
	}}
	l := Listen(listen(t), cfg, Config{InFlight: slots, Timeout: time.Minute})
	defer l.Close()
	go serveEcho(l)

	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := tls.Dial("tcp", l.Addr().String(), clientConfig(tc))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			if _, err := c.Write([]byte("ping")); err != nil {
				errs <- err
				return
			}
			b := make([]byte, 4)
			if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
				errs <- errors.Join(errors.New("no echo"), err)
			}
		}()
	}
	waitFor(t, "3 in flight and 57 waiting for a slot", func() bool {
		s := l.Stats()
		return s.InFlight == slots && s.Waiting == clients-slots && s.Handshaking == clients
	})
	for range slots { // every slot's handshake inside before any is let go
		<-entered
	}
	for range clients - slots { // then one out, one in
		release <- struct{}{}
		<-entered
	}
	for range slots {
		release <- struct{}{}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if p := peak.Load(); p != slots {
		t.Fatalf("at most %d handshakes computed at once, want exactly %d (the bound, reached)", p, slots)
	}
	if s := l.Stats(); s.Done != clients || s.Failed != 0 || s.Waiting != 0 || s.InFlight != 0 || s.Handshaking != 0 {
		t.Fatalf("stats after all handshakes: %+v", s)
	}
}

// stallAfterHello is a client's connection that sends its first flight
// (the ClientHello) and then blocks every write until released: a client
// that stalls mid-handshake.
type stallAfterHello struct {
	net.Conn
	writes  atomic.Int64
	release chan struct{}
}

func (c *stallAfterHello) Write(p []byte) (int, error) {
	if c.writes.Add(1) > 1 {
		<-c.release
	}
	return c.Conn.Write(p)
}

// TestSilentClientsHoldNoSlot: with one slot, a client that connects and
// never sends its ClientHello, one that sends a few bytes of it, and one
// that sends it whole and then stalls, hold no slot while they are
// silent: a fourth client is handshaken meanwhile. None holds its
// connection forever: the gate closes them at their timeout and counts
// them failed.
func TestSilentClientsHoldNoSlot(t *testing.T) {
	tc := testcert.New(t)
	cfg := &tls.Config{Certificates: []tls.Certificate{tc.TLS(t)}}
	l := Listen(listen(t), cfg, Config{InFlight: 1, Timeout: time.Second})
	defer l.Close()
	go serveEcho(l)

	silent, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	partial, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer partial.Close()
	if _, err := partial.Write([]byte{22, 3, 1, 0x05}); err != nil { // a handshake record's header, cut short
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	stalled := &stallAfterHello{Conn: raw, release: make(chan struct{})}
	defer close(stalled.release)
	defer raw.Close()
	stalledDone := make(chan error, 1)
	go func() { stalledDone <- tls.Client(stalled, clientConfig(tc)).Handshake() }()
	waitFor(t, "all three accepted, the stalled one's server flight written", func() bool {
		s := l.Stats()
		return s.Handshaking == 3 && stalled.writes.Load() > 1
	})
	if s := l.Stats(); s.InFlight != 0 || s.Waiting != 0 {
		t.Fatalf("three silent clients: %+v, want no slot held and none waiting", s)
	}

	c, err := tls.Dial("tcp", l.Addr().String(), clientConfig(tc))
	if err != nil {
		t.Fatalf("a client beside three silent ones, with one slot: %v", err)
	}
	c.Close()
	// The gate closes the silent ones at their timeout: their reads end.
	silent.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || isTimeout(err) {
		t.Fatalf("the silent client's connection after its timeout: %d bytes, %v; want it closed", n, err)
	}
	waitFor(t, "the three silent clients failed and gone", func() bool { s := l.Stats(); return s.Failed == 3 && s.Handshaking == 0 })
	if s := l.Stats(); s.Done != 1 || s.Expired != 0 || s.Handshaking != 0 {
		t.Fatalf("stats: %+v, want 1 done and nothing left", s)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestExpiresWaitingForASlot: a handshake that cannot get a slot within
// its timeout (the only slot held by a handshake stuck in its certificate
// lookup) is closed and counted expired, not failed.
func TestExpiresWaitingForASlot(t *testing.T) {
	tc := testcert.New(t)
	cert := tc.TLS(t)
	stuck := make(chan struct{})
	defer close(stuck)
	var calls atomic.Int64
	cfg := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if calls.Add(1) == 1 {
			<-stuck
		}
		return &cert, nil
	}}
	l := Listen(listen(t), cfg, Config{InFlight: 1, Timeout: 500 * time.Millisecond})
	defer l.Close()
	go serveEcho(l)
	first, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	go tls.Client(first, clientConfig(tc)).Handshake()
	waitFor(t, "the first in the slot", func() bool { return calls.Load() == 1 })
	if _, err := tls.Dial("tcp", l.Addr().String(), clientConfig(tc)); err == nil {
		t.Fatal("a handshake went through while the only slot was held past its timeout")
	}
	waitFor(t, "the second expired", func() bool { return l.Stats().Expired == 1 })
	if s := l.Stats(); s.Done != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestServeSpeaksHTTP2: an http.Server serving the gate's connections
// negotiates HTTP/2 with a client that offers it (net/http looks at each
// tls.Conn's negotiated protocol) and HTTP/1.1 with one that does not.
func TestServeSpeaksHTTP2(t *testing.T) {
	tc := testcert.New(t)
	cfg := &tls.Config{Certificates: []tls.Certificate{tc.TLS(t)}, NextProtos: []string{"h2", "http/1.1"}}
	l := Listen(listen(t), cfg, Config{})
	srv := &http.Server{TLSConfig: cfg, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	})}
	go srv.Serve(l)
	defer srv.Close()
	for _, c := range []struct {
		h2   bool
		want string
	}{{true, "HTTP/2.0"}, {false, "HTTP/1.1"}} {
		tr := &http.Transport{TLSClientConfig: clientConfig(tc), ForceAttemptHTTP2: c.h2}
		if !c.h2 {
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + l.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.Proto != c.want || string(b) != c.want {
			t.Errorf("h2 offered %v: answered over %s (handler saw %s), want %s", c.h2, resp.Proto, b, c.want)
		}
	}
}

// TestCloseEndsAcceptAndWaiters: after Close, Accept says the listener is
// closed and a connection still waiting for its handshake is closed.
func TestCloseEndsAcceptAndWaiters(t *testing.T) {
	tc := testcert.New(t)
	cfg := &tls.Config{Certificates: []tls.Certificate{tc.TLS(t)}}
	l := Listen(listen(t), cfg, Config{InFlight: 1, Timeout: time.Minute})
	var conns []net.Conn
	for range 2 { // both silent
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	waitFor(t, "both accepted", func() bool { return l.Stats().Handshaking == 2 })
	accepted := make(chan error, 1)
	go func() { _, err := l.Accept(); accepted <- err }()
	l.Close()
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Read(make([]byte, 1)); isTimeout(err) {
			t.Errorf("connection %d still open after Close", i)
		}
	}
}
