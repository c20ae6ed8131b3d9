package control

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/runos/vpn/control/metrics"
	"github.com/runos/vpn/control/tlsgate"
	"github.com/runos/vpn/internal/connlimit"
)

// Slow clients (docs/internals.md "Slow clients"). Without these, anyone
// could pin control's goroutines and file descriptors with connections
// that send a request's headers and then its body never, or a byte at a
// time.
const (
	defaultBodyTimeout     = 10 * time.Second
	defaultMaxConnsPerAddr = 512
)

// bodyDeadline gives a request's body d from the handler's start to
// arrive whole; past it the read fails and the connection is closed. A
// request with no body (every long-poll and stream is a GET without one)
// has nothing to wait for and gets no deadline: those are held on purpose
// and bounded by their own rules (the wait's 300 s, the stream's
// heartbeat and write bound, the allowance per token of control/server's
// holds.go). Once the body is read to its end the deadline is lifted, so
// a handler that then takes its time (bcrypt, a store that retries) is
// not cut.
func bodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			next.ServeHTTP(w, r) // a writer that cannot (a test recorder)
			return
		}
		r = r.WithContext(r.Context())
		r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline when the body has been read whole.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}

// hsts says on every HTTPS answer that this host is HTTPS only: a browser
// that once reached the console never tries plain HTTP to it again (a
// network that strips TLS cannot then show it a look-alike login page).
// No includeSubDomains: control's name may sit among other services'.
func hsts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		next.ServeHTTP(w, r)
	})
}

// limitConns caps the connections per client address on ln (MaxConnsPerAddr),
// the trusted proxies exempt.
func limitConns(ln net.Listener, cfg Config, log *slog.Logger) net.Listener {
	n := cfg.MaxConnsPerAddr
	if n == 0 {
		n = defaultMaxConnsPerAddr
	}
	trusted := cfg.TrustedProxies
	return connlimit.Listen(ln, connlimit.Config{PerAddr: n, Log: log, What: "control",
		Exempt: func(a netip.Addr) bool { return containsAddr(trusted, a) }})
}

// gateTLS is ln with its TLS handshakes run a few at a time
// (control/tlsgate: GOMAXPROCS computing at once, each within 10 s of its
// accept), so that after a replica's death its devices' handshakes do not
// starve the streams this replica already serves. srv then serves it with
// Serve rather than ServeTLS: its TLSConfig becomes the gate's, offering
// HTTP/2 and HTTP/1.1 as ServeTLS would, so Serve still sets HTTP/2 up and
// each connection gets the protocol it negotiated.
func gateTLS(ln net.Listener, srv *http.Server, mets *metrics.Control, log *slog.Logger) net.Listener {
	cfg := srv.TLSConfig.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	srv.TLSConfig = cfg
	g := tlsgate.Listen(ln, cfg, tlsgate.Config{Log: log})
	mets.TLSGate(g.Stats)
	return g
}
