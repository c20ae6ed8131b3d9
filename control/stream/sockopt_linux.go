package stream

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout bounds how long bytes written to c may stay unacknowledged
// before the kernel gives the connection up (TCP_USER_TIMEOUT): a client
// that vanished without a word is noticed at its next heartbeat plus d,
// not after the kernel's fifteen minutes of retransmissions.
func setUserTimeout(c *net.TCPConn, d time.Duration) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
	})
	if err != nil {
		return err
	}
	return serr
}

// peerDone reports whether the client of a stream has closed its side or
// sent anything (a stream's client sends nothing after its request, so a
// byte to read is its TLS close_notify): a look at the socket without
// reading or waiting, once a heartbeat period, so that a client that went
// away is let go then rather than at a failed write.
func peerDone(c *net.TCPConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var b [1]byte
	done := false
	_ = raw.Read(func(fd uintptr) bool {
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		done = n > 0 || err == nil || err != unix.EAGAIN && err != unix.EINTR
		return true
	})
	return done
}
