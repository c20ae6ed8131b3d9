package tlsgate

import (
	"crypto/tls"
	"io"
	"net"
	"testing"

	"github.com/runos/vpn/internal/testcert"
)

// BenchmarkHandshake is what one TLS connection costs control and its
// client together (both ends in this process, over net.Pipe, so ns/op is
// their CPU: a handshake is a ping-pong), the price of a failover, where
// every device of a dead replica connects to another at once: a full
// handshake with Go's default key exchange (X25519MLKEM768, post-quantum),
// and, to weigh the alternatives, with X25519 alone and resumed from a
// session ticket (which control does not offer across replicas: its
// replicas do not share ticket keys). The certificate is the tests'
// ECDSA P-256 one, as control's usually is.
//
//	go test -run='^$' -bench=BenchmarkHandshake ./control/tlsgate/
func BenchmarkHandshake(b *testing.B) {
	tc := testcert.New(b)
	for _, c := range []struct {
		name   string
		curves []tls.CurveID
		resume bool
	}{
		{"full-default", nil, false},
		{"resumed-default", nil, true},
		{"full-x25519", []tls.CurveID{tls.X25519}, false},
		{"resumed-x25519", []tls.CurveID{tls.X25519}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := &tls.Config{Certificates: []tls.Certificate{tc.TLS(b)}}
			cli := clientConfig(tc)
			cli.CurvePreferences = c.curves
			if c.resume {
				cli.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			}
			handshake(b, srv, cli) // a ticket for the resumed ones
			b.ResetTimer()
			for range b.N {
				if resumed := handshake(b, srv, cli); resumed != c.resume {
					b.Fatalf("resumed %v, want %v", resumed, c.resume)
				}
			}
		})
	}
}

// handshake runs one connection to its first byte of data (which carries
// the server's session ticket to the client) and reports whether it was
// resumed.
func handshake(b *testing.B, srv, cli *tls.Config) bool {
	a, z := net.Pipe()
	done := make(chan error, 1)
	go func() {
		s := tls.Server(a, srv)
		_, err := s.Write([]byte{1})
		s.Close()
		done <- err
	}()
	c := tls.Client(z, cli)
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		b.Fatal(err)
	}
	resumed := c.ConnectionState().DidResume
	if _, err := c.Read(buf); err != io.EOF { // the server's close_notify: net.Pipe has no buffer
		b.Fatalf("after the byte: %v", err)
	}
	c.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return resumed
}
