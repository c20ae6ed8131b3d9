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
