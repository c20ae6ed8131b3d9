package tunnel

import (
	"net"

	"golang.zx2c4.com/wireguard/ipc"
)

// uapiListen opens the named pipe \\.\pipe\ProtectedPrefix\Administrators\WireGuard\<name>.
func uapiListen(name string) (net.Listener, error) {
	return ipc.UAPIListen(name)
}
