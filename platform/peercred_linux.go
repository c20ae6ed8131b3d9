package platform

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerCredOf reads the identity of the process connected on c with
// SO_PEERCRED (the credentials the peer had when it called connect).
func PeerCredOf(c net.Conn) (PeerCred, error) {
	uc, err := rawConn(c)
	if err != nil {
		return PeerCred{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := uc.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return PeerCred{}, fmt.Errorf("peer credentials (SO_PEERCRED): %w", serr)
	}
	return PeerCred{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid), Admin: cred.Uid == 0}, nil
}

func rawConn(c net.Conn) (syscall.RawConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("peer credentials: %T is not a socket", c)
	}
	return sc.SyscallConn()
}
