package relay

import (
	"encoding/binary"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/runos/vpn/internal/relaywire"
)

// Why a handshake is answered the way its initiation came.
//
// wireguard-go sends each packet to its peer's current endpoint, and every
// authenticated packet received moves that endpoint to where it came from.
// While a device is relayed, its data keeps arriving over the relay stream;
// when it probes UDP (a handshake initiation over UDP, every 5 s, to find
// out whether UDP works again), the initiation moves the endpoint to UDP,
// but a data packet decrypted on another goroutine between that and the
// response moves it back, and the response goes over the relay. The device
// then sees its probe answered over the relay, stays relayed, and tries
// again 5 s later: under load this happened in one of several UDP-back
// cycles (vpnd/relay's TestBlockUnblockCycles took 10 s instead of 5).
//
// So the Bind remembers the UDP address of each recent initiation by its
// sender index, and a response to it (its receiver index) goes back over
// UDP to that address whatever the endpoint says then. Only responses are
// steered: data follows wireguard-go's endpoint as before.

// initiationsKept is how many recent UDP initiations are remembered: more
// than the handshakes a node answers within initiationMaxAge in ordinary
// use (wireguard-go limits each source under load); the oldest is forgotten
// first, so a flood costs the steering, never memory.
const (
	initiationsKept  = 256
	initiationMaxAge = 5 * time.Second // a response comes within a handshake's processing
)

type udpInitiation struct {
	sender uint32
	ep     conn.Endpoint
	at     time.Time
}

// initiations is a ring of the latest UDP initiations.
type initiations struct {
	mu   sync.Mutex
	now  func() time.Time
	ring [initiationsKept]udpInitiation
	next int
}

// ObserveUDP (wghost.UDPObserver) notes the UDP initiations of a batch.
func (b *Bind) ObserveUDP(bufs [][]byte, sizes []int, eps []conn.Endpoint, n int) {
	for i := 0; i < n; i++ {
		if sizes[i] >= 8 && relaywire.MessageType(bufs[i][:sizes[i]]) == relaywire.MsgInitiation {
			b.inits.add(binary.LittleEndian.Uint32(bufs[i][4:8]), eps[i])
		}
	}
}

func (r *initiations) add(sender uint32, ep conn.Endpoint) {
	r.mu.Lock()
	r.ring[r.next] = udpInitiation{sender: sender, ep: ep, at: r.now()}
	r.next = (r.next + 1) % len(r.ring)
	r.mu.Unlock()
}

// answerTo is the UDP address of the initiation a lone handshake response
// answers, when it came over UDP lately; nil for anything else.
func (r *initiations) answerTo(bufs [][]byte) conn.Endpoint {
	if len(bufs) != 1 || len(bufs[0]) < 12 || relaywire.MessageType(bufs[0]) != relaywire.MsgResponse {
		return nil
	}
	receiver := binary.LittleEndian.Uint32(bufs[0][8:12])
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for i := range r.ring {
		in := &r.ring[i]
		if in.ep != nil && in.sender == receiver && now.Sub(in.at) < initiationMaxAge {
			return in.ep
		}
	}
	return nil
}
