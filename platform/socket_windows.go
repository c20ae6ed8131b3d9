package platform

import (
	"context"
	"net"

	"golang.org/x/sys/windows"
	"golang.zx2c4.com/wireguard/ipc/namedpipe"
)

// Dial connects to the daemon's named pipe.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	return namedpipe.DialContext(ctx, path)
}

// Listen creates the daemon's named pipe. Everyone may connect (to read
// status); who may change state is decided per request from the client's token.
func Listen(path string) (net.Listener, error) {
	return (&namedpipe.ListenConfig{
		// SYSTEM and Administrators full control; authenticated users read/write.
		SecurityDescriptor: mustSD("O:SYD:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;AU)"),
	}).Listen(path)
}

func mustSD(sddl string) *windows.SECURITY_DESCRIPTOR {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		panic("platform: bad SDDL " + sddl + ": " + err.Error())
	}
	return sd
}
