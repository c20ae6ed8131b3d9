// Package relaywire is the wire protocol of the relay (WireGuard over
// HTTPS) that a laptop's daemon (vpnd/relay) and a node's gateway
// (gateway/relay) speak: the request that opens a relay stream, and the
// frames that carry WireGuard datagrams on it.
//
// A relay stream is one WebSocket (RFC 6455, github.com/coder/websocket)
// carrying binary messages; the bytes of the messages, read as one stream,
// are frames:
//
//	+--------+----------------+---------------------+
//	| type 1 | length 2 (BE)  | payload (length)    |
//	+--------+----------------+---------------------+
//
// Type FrameData carries one whole WireGuard datagram, ciphertext as
// wireguard-go wrote it: the relay never sees or makes plaintext. A writer
// puts a batch of datagrams in one message (one TLS record where they fit);
// a reader must not assume message boundaries fall on frames. Frames of
// a type a reader does not know are skipped, so later versions can add
// some. The shape (type, length, payload) follows Tailscale's DERP framing,
// with a 16-bit length because a datagram never exceeds 65535 bytes.
//
// It is not for anything but the relay: control's API is api.
package relaywire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Path is where a gateway serves relay streams by default; control's
// device map gives the whole URL (https://<ingress>/runos-vpn/relay).
const Path = "/runos-vpn/relay"

// Headers of the request that opens a relay stream. The device shows a
// relay ticket control issued it for this cluster and node (never its
// session token: the relay and the node's ingress see what it sends);
// the gateway asks control whether the ticket is good for the device with
// this key, joined to the gateway's cluster.
const (
	HeaderTicket    = "Runos-Relay-Ticket" // api.RelayTicket.Ticket
	HeaderDeviceKey = "Runos-Device-Key"   // the device's WireGuard public key, base64
	// Subprotocol names this protocol in Sec-WebSocket-Protocol, so a
	// stream is never mistaken for any other WebSocket.
	Subprotocol = "runos-relay.v1"
)

// Frame types.
const (
	FrameData byte = 1 // one WireGuard datagram
)

// HeaderLen is a frame's header: type and length.
const HeaderLen = 3

// MaxPayload is the largest payload a frame carries (a UDP datagram's
// largest size).
const MaxPayload = 1<<16 - 1

// ErrEmpty is a data frame with no datagram in it: never written, refused
// when read.
var ErrEmpty = errors.New("relay: empty data frame")

// AppendFrame appends a frame of type typ with payload p to b.
func AppendFrame(b []byte, typ byte, p []byte) ([]byte, error) {
	if len(p) > MaxPayload {
		return b, fmt.Errorf("relay: frame of %d bytes (at most %d)", len(p), MaxPayload)
	}
	if typ == FrameData && len(p) == 0 {
		return b, ErrEmpty
	}
	b = append(b, typ, byte(len(p)>>8), byte(len(p)))
	return append(b, p...), nil
}

// Reader reads frames from a stream.
type Reader struct {
	r   *bufio.Reader
	hdr [HeaderLen]byte
}

// NewReader reads frames from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ReadData reads the next data frame into buf and returns its length,
// skipping frames of other types. buf must hold MaxPayload bytes, or the
// frame fails with an error. io.EOF means the stream ended between frames;
// io.ErrUnexpectedEOF that it ended inside one.
func (fr *Reader) ReadData(buf []byte) (int, error) {
	for {
		if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
			return 0, err
		}
		typ, n := fr.hdr[0], int(binary.BigEndian.Uint16(fr.hdr[1:]))
		if typ != FrameData {
			if _, err := fr.r.Discard(n); err != nil {
				return 0, unexpected(err)
			}
			continue
		}
		if n == 0 {
			return 0, ErrEmpty
		}
		if n > len(buf) {
			return 0, fmt.Errorf("relay: data frame of %d bytes, buffer of %d", n, len(buf))
		}
		if _, err := io.ReadFull(fr.r, buf[:n]); err != nil {
			return 0, unexpected(err)
		}
		return n, nil
	}
}

// Buffered reports whether a frame may be read without waiting on the
// stream (some of it is buffered), so a reader can hand on a batch.
func (fr *Reader) Buffered() bool { return fr.r.Buffered() > 0 }

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// MessageType is the first byte of a WireGuard message (its type, a
// little-endian uint32 whose other bytes are zero): 1 initiation,
// 2 response, 3 cookie reply, 4 transport data. The relay's ends read it to
// tell handshakes from data; 0 for anything too short to be WireGuard's.
func MessageType(p []byte) byte {
	if len(p) < 4 {
		return 0
	}
	return p[0]
}

// WireGuard message types (wireguard-go's device.MessageInitiationType …).
const (
	MsgInitiation byte = 1
	MsgResponse   byte = 2
	MsgCookie     byte = 3
	MsgData       byte = 4
)
