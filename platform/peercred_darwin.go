package platform

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerCredOf reads the identity of the process connected on c with
// LOCAL_PEERCRED (and LOCAL_PEERPID for its pid).
func PeerCredOf(c net.Conn) (PeerCred, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return PeerCred{}, fmt.Errorf("peer credentials: %T is not a socket", c)
	}
	uc, err := sc.SyscallConn()
	if err != nil {
		return PeerCred{}, err
	}
	var x *unix.Xucred
	var pid int
	var serr error
	if err := uc.Control(func(fd uintptr) {
		x, serr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if serr == nil {
			pid, _ = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		}
	}); err != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return PeerCred{}, fmt.Errorf("peer credentials (LOCAL_PEERCRED): %w", serr)
	}
	gid := -1
	if x.Ngroups > 0 {
		gid = int(x.Groups[0]) // the effective group comes first
	}
	return PeerCred{UID: int(x.Uid), GID: gid, PID: pid, Admin: x.Uid == 0}, nil
}
