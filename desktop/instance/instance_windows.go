package instance

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/windows"
	"golang.zx2c4.com/wireguard/ipc/namedpipe"
)

// DefaultAddr is a named pipe for this user, named by the user's SID.
func DefaultAddr() (string, error) {
	sid, err := userSID()
	if err != nil {
		return "", fmt.Errorf("no name for the single-instance pipe: %w", err)
	}
	return `\\.\pipe\runos-desktop-` + sid, nil
}

func userSID() (string, error) {
	tok := windows.GetCurrentProcessToken()
	u, err := tok.GetTokenUser()
	if err != nil {
		return "", err
	}
	return u.User.Sid.String(), nil
}

// listen creates the pipe as its first instance (namedpipe asks for
// FILE_FLAG_FIRST_PIPE_INSTANCE), so a second creation fails while the
// first app runs; only this user (and SYSTEM) may open it.
func listen(path string) (net.Listener, func(), error) {
	sid, err := userSID()
	if err != nil {
		return nil, nil, err
	}
	sd, err := windows.SecurityDescriptorFromString("O:" + sid + "D:P(A;;GA;;;" + sid + ")(A;;GA;;;SY)")
	if err != nil {
		return nil, nil, err
	}
	l, err := (&namedpipe.ListenConfig{SecurityDescriptor: sd}).Listen(path)
	if err != nil {
		if errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_PIPE_BUSY) {
			return nil, nil, errHeld
		}
		return nil, nil, err
	}
	return l, func() {}, nil
}

func dial(ctx context.Context, path string) (net.Conn, error) {
	return namedpipe.DialContext(ctx, path)
}
