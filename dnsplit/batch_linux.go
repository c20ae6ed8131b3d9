package dnsplit

import (
	"net"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// batchConn is ipv4.PacketConn or ipv6.PacketConn: their Messages are the
// same type.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
}

// mmsgReader reads with recvmmsg through golang.org/x/net (the runtime's
// poller waits for the socket, as for any read).
type mmsgReader struct {
	pc  batchConn
	ms  []ipv4.Message
	out []datagram
}

func newPacketReader(c *net.UDPConn, batch, size int) packetReader {
	var pc batchConn = ipv4.NewPacketConn(c)
	if la, ok := c.LocalAddr().(*net.UDPAddr); ok && la.IP.To4() == nil {
		pc = ipv6.NewPacketConn(c)
	}
	r := &mmsgReader{pc: pc, ms: make([]ipv4.Message, batch), out: make([]datagram, 0, batch)}
	bufs := make([]byte, batch*size)
	for i := range r.ms {
		r.ms[i].Buffers = [][]byte{bufs[i*size : (i+1)*size : (i+1)*size]}
	}
	return r
}

func (r *mmsgReader) read() ([]datagram, error) {
	n, err := r.pc.ReadBatch(r.ms, 0)
	if err != nil {
		return nil, err
	}
	r.out = r.out[:0]
	for _, m := range r.ms[:n] {
		d := datagram{b: m.Buffers[0][:m.N], trunc: m.Flags&unix.MSG_TRUNC != 0}
		if ua, ok := m.Addr.(*net.UDPAddr); ok {
			d.from = ua.AddrPort()
		}
		r.out = append(r.out, d)
	}
	return r.out, nil
}
