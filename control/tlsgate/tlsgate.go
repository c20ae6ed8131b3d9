// Package tlsgate admits TLS handshakes to the CPU a few at a time: a
// listener that accepts raw connections, completes their handshakes while
// at most N of them compute at once, and hands finished *tls.Conn to
// http.Server.Serve.
//
// Why: a handshake costs the server ~0.4 ms of CPU (docs/performance.md
// "What a failover costs before control does anything: TLS"). When a
// replica dies, its devices all arrive at the survivors in the same
// seconds; with net/http's own tls.Listener every one of them computes its
// handshake at once, thousands of goroutines competing for two CPUs with
// the streams the survivor already holds, whose events and heartbeats then
// wait behind them. Gated, the work of the connections already served is
// never queued behind more than N handshakes; the others wait their turn,
// first come first served.
//
// A slot is a handshake's turn at the CPU, not its whole handshake: it is
// taken once the client's whole ClientHello has arrived, for computing
// the server's answer (key exchange, certificate, signature: nearly all of
// the server's cost), and given back when the answer is written or the
// handshake waits for the client again. Checking the client's Finished
// afterwards is cheap and takes no slot, so a handshake that has had its
// turn is never queued again behind newer ones. A client that never
// sends its ClientHello, sends part of it, or stalls after it, never
// holds a slot while it is silent; it only holds its connection, until
// Timeout from its accept, after which the gate closes it. N defaults to
// GOMAXPROCS: enough to keep every CPU busy with handshakes when nothing
// else wants them, since waiting for the network costs no slot.
//
// Connections wait for a slot inside the gate, at most Queue of them
// accepted and unfinished at once; past that the gate stops accepting and
// the next ones wait in the kernel's accept queue, as they would for any
// busy server.
//
// It is not a rate limiter, a per-client limit (internal/connlimit is) or
// a TLS configuration: the caller's tls.Config is used as given (see
// Listen on HTTP/2).
package tlsgate

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Config says how many handshakes compute at once and how long each may
// take.
type Config struct {
	// InFlight is how many handshakes may compute at once (0:
	// GOMAXPROCS).
	InFlight int
	// Queue is how many accepted connections may be unfinished at once,
	// waiting for their client or a slot (0: 4,096); past it, new ones
	// wait in the kernel's accept queue.
	Queue int
	// Timeout bounds a connection from its accept to the end of its
	// handshake, waits for a slot included (0: 10 s, control's
	// ReadHeaderTimeout, which bounded the handshake before).
	Timeout time.Duration
	// Log, when set, gets a debug line for each failed handshake.
	Log *slog.Logger
}

// Stats are the gate's counts now and since it started.
type Stats struct {
	Waiting     int // with bytes from their client, waiting for a slot
	InFlight    int // holding a slot: computing
	Handshaking int // accepted and unfinished (waiting, in flight or waiting for their client)
	Done        uint64
	Failed      uint64 // the handshake failed, or timed out waiting for its client
	Expired     uint64 // timed out waiting for a slot
}

// Listener is a net.Listener whose Accept returns *tls.Conn with their
// handshakes done.
type Listener struct {
	inner   net.Listener
	cfg     *tls.Config
	timeout time.Duration
	log     *slog.Logger

	slots   chan struct{} // a value per handshake computing
	pending chan struct{} // a value per connection accepted and not handed over
	ready   chan *tls.Conn

	closeOnce sync.Once
	done      chan struct{}
	ctx       context.Context // ends at Close: handshakes under way stop
	cancel    context.CancelFunc
	errMu     sync.Mutex
	err       error // the inner Accept's permanent error
	failed    chan struct{}

	waiting, handshaking  atomic.Int64
	ok, failedN, expiredN atomic.Uint64
}

// Listen wraps inner: connections it accepts are handshaken with cfg. For
// http.Server.Serve to speak HTTP/2 over them, cfg.NextProtos must list
// "h2" and the server's TLSConfig must be cfg (or list "h2" too): Serve
// then sets HTTP/2 up and looks at each tls.Conn's negotiated protocol, as
// ServeTLS does after adding "h2" itself.
func Listen(inner net.Listener, cfg *tls.Config, gc Config) *Listener {
	if gc.InFlight <= 0 {
		gc.InFlight = runtime.GOMAXPROCS(0)
	}
	if gc.Queue <= 0 {
		gc.Queue = 4096
	}
	if gc.Timeout <= 0 {
		gc.Timeout = 10 * time.Second
	}
	l := &Listener{inner: inner, cfg: cfg, timeout: gc.Timeout, log: gc.Log,
		slots: make(chan struct{}, gc.InFlight), pending: make(chan struct{}, gc.Queue), ready: make(chan *tls.Conn),
		done: make(chan struct{}), failed: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.acceptLoop()
	return l
}

// Accept returns the next connection whose handshake is done.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-l.failed:
		l.errMu.Lock()
		defer l.errMu.Unlock()
		return nil, l.err
	}
}

// Close closes the inner listener and every connection not handed over
// yet, those handshaking included.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		l.cancel()
		err = l.inner.Close()
	})
	return err
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Stats are the gate's counts now.
func (l *Listener) Stats() Stats {
	return Stats{Waiting: int(l.waiting.Load()), InFlight: len(l.slots), Handshaking: int(l.handshaking.Load()),
		Done: l.ok.Load(), Failed: l.failedN.Load(), Expired: l.expiredN.Load()}
}

// acceptLoop accepts raw connections while fewer than Queue are
// unfinished, and starts each one's handshake.
func (l *Listener) acceptLoop() {
	var delay time.Duration
	for {
		select {
		case l.pending <- struct{}{}:
		case <-l.done:
			return
		}
		c, err := l.inner.Accept()
		if err != nil {
			<-l.pending
			select {
			case <-l.done:
				return
			default:
			}
			if isTemporary(err) {
				// As net/http does: out of descriptors, say; try again.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(delay):
				case <-l.done:
					return
				}
				continue
			}
			l.errMu.Lock()
			l.err = err
			l.errMu.Unlock()
			close(l.failed)
			return
		}
		delay = 0
		go l.handshake(c, time.Now().Add(l.timeout))
	}
}

func isTemporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// handshake completes c's handshake by deadline and hands it to Accept.
func (l *Listener) handshake(c net.Conn, deadline time.Time) {
	defer func() { <-l.pending }()
	l.handshaking.Add(1)
	ctx, cancel := context.WithDeadline(l.ctx, deadline)
	defer cancel()
	gc := &gatedConn{Conn: c, l: l, ctx: ctx}
	gc.gated.Store(true)
	tc := tls.Server(gc, l.cfg)
	// The deadline on the connection too: a client that sends nothing
	// blocks a read, which the context alone would end only by closing
	// the connection.
	c.SetDeadline(deadline)
	err := tc.HandshakeContext(ctx)
	// No longer handshaking once it has ended, before it is handed on: a
	// client served from Accept could otherwise finish, and Stats be read,
	// while this goroutine still counted it (TestBoundHoldsUnderManyClients
	// saw Handshaking 1 after every client was done, in CI).
	l.handshaking.Add(-1)
	gc.giveBack()
	gc.gated.Store(false)
	if err != nil {
		if gc.expired {
			l.expiredN.Add(1)
		} else {
			l.failedN.Add(1)
		}
		if l.log != nil {
			l.log.Debug("TLS handshake failed", "remote", c.RemoteAddr().String(), "expired", gc.expired, "err", err)
		}
		tc.Close()
		return
	}
	c.SetDeadline(time.Time{})
	l.ok.Add(1)
	select {
	case l.ready <- tc:
	case <-l.done:
		tc.Close()
	}
}

// gatedConn is a connection during its handshake. Its first read reads
// the client's whole first record (the ClientHello) with no slot, then
// waits for a slot and hands the record over: the handshake computes its
// answer (key exchange, certificate, signature) in that slot, which it
// gives back when it writes its answer or needs more from the client. The
// rest (the client's Finished checked) is cheap and runs with no slot,
// and is never queued behind newer connections' turns. After the
// handshake it is the connection it wraps.
type gatedConn struct {
	net.Conn
	l     *Listener
	ctx   context.Context
	gated atomic.Bool
	// Only the handshake's goroutine touches these, while gated.
	hello   []byte // the first record, read before its turn, not handed over yet
	turned  bool   // has had its turn (or its wait for one ended)
	held    bool
	expired bool
}

// maxHelloRecord bounds the first record read ahead: TLS's plaintext
// limit and some. A first record that is no handshake or says it is
// larger is handed over as it came, for the handshake to refuse.
const maxHelloRecord = 16384 + 2048

func (c *gatedConn) Read(p []byte) (int, error) {
	if !c.gated.Load() {
		return c.Conn.Read(p)
	}
	if !c.turned {
		c.turned = true
		if err := c.readHello(); err != nil {
			return 0, err
		}
		if err := c.take(); err != nil {
			return 0, err
		}
	}
	if len(c.hello) > 0 {
		n := copy(p, c.hello)
		c.hello = c.hello[n:]
		return n, nil
	}
	c.giveBack() // waiting for the client again
	return c.Conn.Read(p)
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if c.gated.Load() {
		c.giveBack() // the answer is computed
	}
	return c.Conn.Write(p)
}

// readHello reads the first record whole, header and body.
func (c *gatedConn) readHello() error {
	h := make([]byte, 5, 5+512)
	if _, err := io.ReadFull(c.Conn, h); err != nil {
		return err
	}
	c.hello = h
	n := int(binary.BigEndian.Uint16(h[3:5]))
	if h[0] != 22 || n > maxHelloRecord { // not a handshake record
		return nil
	}
	c.hello = append(c.hello, make([]byte, n)...)
	_, err := io.ReadFull(c.Conn, c.hello[5:])
	return err
}

// take waits for a slot, until the handshake's deadline.
func (c *gatedConn) take() error {
	c.l.waiting.Add(1)
	defer c.l.waiting.Add(-1)
	select {
	case c.l.slots <- struct{}{}:
		c.held = true
		return nil
	case <-c.ctx.Done():
		c.expired = errors.Is(c.ctx.Err(), context.DeadlineExceeded) // not closed
		return errors.New("tlsgate: timed out waiting for a handshake slot")
	}
}

func (c *gatedConn) giveBack() {
	if c.held {
		<-c.l.slots
		c.held = false
	}
}

// NetConn is the connection it wraps, as tls.Conn's NetConn: whoever
// looks for the TCP socket underneath (control/stream) finds it.
func (c *gatedConn) NetConn() net.Conn { return c.Conn }
