package pgtest

import (
	"syscall"

	"github.com/runos/vpn/internal/pgserver"
)

// asUser runs the server as acct, killed with the test binary.
func asUser(acct pgserver.Account) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(acct.UID), Gid: uint32(acct.GID)},
		Pdeathsig:  syscall.SIGKILL, // the test binary died: do not outlive it
		Setpgid:    true,
	}
}
