package relay

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/runos/vpn/internal/relaywire"
)

func message(typ byte, sender, receiver uint32) []byte {
	b := make([]byte, 92)
	b[0] = typ
	binary.LittleEndian.PutUint32(b[4:8], sender)
	binary.LittleEndian.PutUint32(b[8:12], receiver)
	return b
}

// TestAnswerTo: a lone handshake response to an initiation that came over
// UDP lately goes back to that initiation's address; anything else (data,
// a batch, another index, an old initiation, one forgotten for newer ones)
// follows the endpoint.
func TestAnswerTo(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	b := &Bind{inits: initiations{now: func() time.Time { return now }}}
	udpEp := &conn.StdNetEndpoint{AddrPort: netip.MustParseAddrPort("192.0.2.7:40000")}
	init := message(relaywire.MsgInitiation, 0xa1b2c3d4, 0)
	data := message(relaywire.MsgData, 0, 0)
	b.ObserveUDP([][]byte{data, init}, []int{len(data), len(init)}, []conn.Endpoint{udpEp, udpEp}, 2)

	resp := message(relaywire.MsgResponse, 7, 0xa1b2c3d4)
	if got := b.inits.answerTo([][]byte{resp}); got != udpEp {
		t.Fatalf("response to a UDP initiation: answerTo = %v, want %v", got, udpEp)
	}
	for name, bufs := range map[string][][]byte{
		"data":           {message(relaywire.MsgData, 0, 0xa1b2c3d4)},
		"other index":    {message(relaywire.MsgResponse, 7, 0x01020304)},
		"batch":          {resp, resp},
		"short":          {resp[:11]},
		"cookie message": {message(relaywire.MsgCookie, 0xa1b2c3d4, 0xa1b2c3d4)},
	} {
		if got := b.inits.answerTo(bufs); got != nil {
			t.Errorf("%s: answerTo = %v, want nil", name, got)
		}
	}
	now = now.Add(initiationMaxAge)
	if got := b.inits.answerTo([][]byte{resp}); got != nil {
		t.Errorf("an initiation %s old still steers its response to %v", initiationMaxAge, got)
	}
	// A flood of newer initiations pushes it out of the ring, never grows it.
	b.ObserveUDP([][]byte{init}, []int{len(init)}, []conn.Endpoint{udpEp}, 1)
	for i := range initiationsKept {
		other := message(relaywire.MsgInitiation, uint32(i+1), 0)
		b.ObserveUDP([][]byte{other}, []int{len(other)}, []conn.Endpoint{udpEp}, 1)
	}
	if got := b.inits.answerTo([][]byte{resp}); got != nil {
		t.Errorf("an initiation pushed out of the ring still steers: %v", got)
	}
}
