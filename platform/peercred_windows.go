package platform

import (
	"fmt"
	"net"

	"golang.org/x/sys/windows"
)

// pipeHandle is what the named pipe connections of
// golang.zx2c4.com/wireguard/ipc/namedpipe expose of themselves.
type pipeHandle interface{ Handle() windows.Handle }

// PeerCredOf reads the identity of the process at the client end of the
// named pipe c: the kernel names the client's process, whose token says
// who runs it, whether it is elevated and which groups it holds. (Impersonating the client would
// avoid the process lookup, but namedpipe dials with SECURITY_ANONYMOUS,
// which gives an anonymous token.)
func PeerCredOf(c net.Conn) (PeerCred, error) {
	none := PeerCred{UID: -1, GID: -1}
	ph, ok := c.(pipeHandle)
	if !ok {
		return none, fmt.Errorf("peer credentials: %T is not a named pipe", c)
	}
	var pid uint32
	if err := windows.GetNamedPipeClientProcessId(ph.Handle(), &pid); err != nil {
		return none, fmt.Errorf("peer credentials: the pipe's client process: %w", err)
	}
	none.PID = int(pid)
	proc, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		return none, fmt.Errorf("peer credentials: open client process %d: %w", pid, err)
	}
	defer windows.CloseHandle(proc)
	var tok windows.Token
	if err := windows.OpenProcessToken(proc, windows.TOKEN_QUERY, &tok); err != nil {
		return none, fmt.Errorf("peer credentials: token of process %d: %w", pid, err)
	}
	defer tok.Close()
	tu, err := tok.GetTokenUser()
	if err != nil {
		return none, fmt.Errorf("peer credentials: user of process %d: %w", pid, err)
	}
	tg, err := tok.GetTokenGroups()
	if err != nil {
		return none, fmt.Errorf("peer credentials: groups of process %d: %w", pid, err)
	}
	var groups []tokenGroup
	for _, g := range tg.AllGroups() {
		groups = append(groups, tokenGroup{SID: g.Sid.String(), Attrs: g.Attributes})
	}
	sid := tu.User.Sid
	return PeerCred{
		UID:       -1,
		GID:       -1,
		PID:       int(pid),
		SID:       sid.String(),
		Admin:     tok.IsElevated() || sid.IsWellKnown(windows.WinLocalSystemSid),
		GroupSIDs: enabledGroupSIDs(groups),
	}, nil
}

// enabledGroupSIDs reads the attributes with the constants of winnt.h; the
// arrays have length 0 only when they are golang.org/x/sys/windows's too.
var (
	_ [0]struct{} = [windows.SE_GROUP_ENABLED ^ seGroupEnabled]struct{}{}
	_ [0]struct{} = [windows.SE_GROUP_USE_FOR_DENY_ONLY ^ seGroupUseForDenyOnly]struct{}{}
)
