//go:build !linux

package dnsplit

import "net"

// oneReader reads one datagram per call: no recvmmsg here.
type oneReader struct {
	c   *net.UDPConn
	buf []byte
	out [1]datagram
}

func newPacketReader(c *net.UDPConn, _, size int) packetReader {
	// One byte more than size tells a datagram longer than size apart.
	return &oneReader{c: c, buf: make([]byte, size+1)}
}

func (r *oneReader) read() ([]datagram, error) {
	n, from, err := r.c.ReadFromUDPAddrPort(r.buf)
	if err != nil {
		return nil, err
	}
	trunc := n > len(r.buf)-1
	r.out[0] = datagram{b: r.buf[:min(n, len(r.buf)-1)], from: from, trunc: trunc}
	return r.out[:], nil
}
