// Package relay is the gateway's side of the relay: WireGuard over HTTPS for
// laptops whose network lets nothing but TCP 443 through. A device opens
// an authenticated stream (server.go) and sends the same WireGuard
// datagrams over it that it would send over UDP; Bind (the WireGuard
// host's wghost.Bind with this package's policy) hands them to the node's
// one wireguard-go server next to the UDP ones and sends its answers back
// the way each peer last came. Keys, allowed IPs, handshakes and `wg show`
// are the same for relayed and direct peers.
//
// The stream is a WebSocket (github.com/coder/websocket) rather than an
// HTTP/2 stream: in production it is reached through the node's ingress on
// 443, Traefik, which passes WebSocket upgrades through with no
// configuration, while a long-lived full-duplex HTTP/2 stream needs h2
// end to end and a proxy that does not buffer request bodies; the
// corporate and hotel proxies a relay exists for pass WebSockets far more
// often than bidirectional HTTP/2; and it is the library the project
// already chose. Inside it, internal/relaywire frames the datagrams so
// that one WebSocket message carries a whole batch (wghost.Stream, the
// same framing the daemon's end writes).
//
// The relay carries ciphertext only: it never holds a key and cannot read
// or make a packet the peers would accept. It is not a general proxy:
// every datagram goes into this node's WireGuard server and nowhere else.
package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/wghost"
)

// Bind is the node's wghost.Bind: UDP through wireguard-go's own Bind and,
// next to it, the relay streams attached to it. Its policy (Route) sends
// each answer the way its peer last came: a relay Endpoint is a stream,
// any other endpoint is UDP.
type Bind struct {
	*wghost.Bind
	log *slog.Logger

	nextID atomic.Uint64

	mu      sync.Mutex
	streams map[uint64]*stream

	inits initiations // recent UDP initiations, to answer over UDP (answer.go)
}

// NewBind wraps udp (conn.NewDefaultBind() in production).
func NewBind(udp conn.Bind, log *slog.Logger) *Bind {
	b := &Bind{log: log, streams: map[uint64]*stream{}, inits: initiations{now: time.Now}}
	b.Bind = wghost.NewBind(udp, b)
	return b
}

// Endpoint is a relay stream as wireguard-go sees it: the peer's endpoint
// while its last packet came over that stream. Its address is the TCP
// address the stream came from (what `wg show` prints).
type Endpoint struct {
	id     uint64
	key    wgtypes.Key
	remote netip.AddrPort
}

var (
	_ conn.Endpoint      = (*Endpoint)(nil)
	_ wghost.UDPObserver = (*Bind)(nil)
)

func (e *Endpoint) ClearSrc()           {}
func (e *Endpoint) SrcToString() string { return "" }
func (e *Endpoint) DstToString() string { return e.remote.String() }
func (e *Endpoint) DstToBytes() []byte  { b, _ := e.remote.MarshalBinary(); return b }
func (e *Endpoint) DstIP() netip.Addr   { return e.remote.Addr() }
func (e *Endpoint) SrcIP() netip.Addr   { return netip.Addr{} }

// Route sends to a relay stream or, for any other endpoint, over UDP; a
// handshake response to an initiation that came over UDP goes back over
// UDP (answer.go).
func (b *Bind) Route(udp conn.Bind, bufs [][]byte, ep conn.Endpoint) error {
	e, ok := ep.(*Endpoint)
	if !ok {
		return udp.Send(bufs, ep)
	}
	if to := b.inits.answerTo(bufs); to != nil {
		return udp.Send(bufs, to) // a probe over UDP is answered over UDP
	}
	b.mu.Lock()
	s := b.streams[e.id]
	b.mu.Unlock()
	if s == nil {
		return fmt.Errorf("relay stream of %s from %s: %w", e.key, e.remote, net.ErrClosed)
	}
	return s.send(bufs)
}

// Serving reports whether wireguard-go has the Bind open: the node serves
// a VPN server (the relay refuses streams otherwise).
func (b *Bind) Serving() bool { return b.IsOpen() }

// Streams is how many relay streams are attached.
func (b *Bind) Streams() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.streams)
}

// Relayed reports whether key has a relay stream attached: its endpoint
// on the server is then the stream's TCP address, no place to send UDP to
// (the gateway keeps no such endpoint for its restarts).
func (b *Bind) Relayed(key wgtypes.Key) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.streams {
		if s.ep.key == key {
			return true
		}
	}
	return false
}

// KeepOnly closes the streams of devices that are no longer peers (their
// session ended, they left the cluster): the relay serves only the peers
// of the server.
func (b *Bind) KeepOnly(peers map[wgtypes.Key]bool) {
	b.mu.Lock()
	var gone []*stream
	for _, s := range b.streams {
		if !peers[s.ep.key] {
			gone = append(gone, s)
		}
	}
	b.mu.Unlock()
	for _, s := range gone {
		s.close(errors.New("no longer a peer of this server"))
	}
}

// CloseStreams closes every stream (the node stops serving).
func (b *Bind) CloseStreams(why string) {
	b.mu.Lock()
	all := make([]*stream, 0, len(b.streams))
	for _, s := range b.streams {
		all = append(all, s)
	}
	b.mu.Unlock()
	for _, s := range all {
		s.close(errors.New(why))
	}
}

// maxStreamsPerKey bounds the streams one device may hold: a reconnect
// may overlap the old stream for a moment, no more.
const maxStreamsPerKey = 4

func (b *Bind) attach(s *stream) {
	b.mu.Lock()
	var oldest *stream
	count := 0
	for _, o := range b.streams {
		if o.ep.key == s.ep.key {
			count++
			if oldest == nil || o.ep.id < oldest.ep.id {
				oldest = o
			}
		}
	}
	b.streams[s.ep.id] = s
	b.mu.Unlock()
	if count >= maxStreamsPerKey {
		oldest.close(errors.New("the device opened newer streams"))
	}
}

func (b *Bind) detach(s *stream) {
	b.mu.Lock()
	delete(b.streams, s.ep.id)
	b.mu.Unlock()
}
