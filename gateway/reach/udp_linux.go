package reach

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// transparent sets what a socket needs to take TPROXY's datagrams (and
// tell their original destination) or to send from an address the node
// does not have.
func transparent(v6, origDst, reuse bool) func(string, string, syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			set := func(level, opt int) {
				if serr == nil {
					serr = unix.SetsockoptInt(int(fd), level, opt, 1)
				}
			}
			if reuse {
				set(unix.SOL_SOCKET, unix.SO_REUSEADDR)
			}
			if v6 {
				set(unix.SOL_IPV6, unix.IPV6_TRANSPARENT)
				set(unix.SOL_IPV6, unix.IPV6_V6ONLY)
				if origDst {
					set(unix.SOL_IPV6, unix.IPV6_RECVORIGDSTADDR)
				}
				return
			}
			set(unix.SOL_IP, unix.IP_TRANSPARENT)
			if origDst {
				set(unix.SOL_IP, unix.IP_RECVORIGDSTADDR)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

type udpListener struct{ c *net.UDPConn }

// ListenUDP opens a transparent UDP listener on a free port.
func (LinuxOS) ListenUDP(network string) (UDPListener, error) {
	v6 := network == "udp6"
	addr := "0.0.0.0:0"
	if v6 {
		addr = "[::]:0"
	}
	lc := net.ListenConfig{Control: transparent(v6, true, false)}
	pc, err := lc.ListenPacket(context.Background(), network, addr)
	if err != nil {
		return nil, fmt.Errorf("forwarding into the cluster: transparent listener (%s): %w", network, err)
	}
	return udpListener{pc.(*net.UDPConn)}, nil
}

func (l udpListener) Port() int    { return l.c.LocalAddr().(*net.UDPAddr).Port }
func (l udpListener) Close() error { return l.c.Close() }

func (l udpListener) ReadFrom(b []byte) (int, netip.AddrPort, netip.AddrPort, error) {
	oob := make([]byte, 128)
	n, oobn, _, src, err := l.c.ReadMsgUDPAddrPort(b, oob)
	if err != nil {
		return 0, src, netip.AddrPort{}, err
	}
	dst, err := origDst(oob[:oobn])
	return n, netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), dst, err
}

// origDst reads the original destination from a datagram's control data
// (a sockaddr_in or sockaddr_in6).
func origDst(oob []byte) (netip.AddrPort, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return netip.AddrPort{}, err
	}
	for _, m := range msgs {
		d := m.Data
		switch {
		case m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_ORIGDSTADDR && len(d) >= 8:
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(d[4:8])), binary.BigEndian.Uint16(d[2:4])), nil
		case m.Header.Level == unix.SOL_IPV6 && m.Header.Type == unix.IPV6_ORIGDSTADDR && len(d) >= 24:
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(d[8:24])), binary.BigEndian.Uint16(d[2:4])), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("no original destination in the datagram's control data")
}

// ReplyConn opens a socket bound to local (an address the node may not
// have) and connected to remote.
func (LinuxOS) ReplyConn(local, remote netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(local), Control: transparent(local.Addr().Is6(), false, true)}
	network := "udp4"
	if local.Addr().Is6() {
		network = "udp6"
	}
	return d.Dial(network, remote.String())
}
