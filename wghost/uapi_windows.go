package wghost

import (
	"net"

	"golang.zx2c4.com/wireguard/ipc"
)

// listenUAPI opens the named pipe \\.\pipe\ProtectedPrefix\Administrators\WireGuard\<name>.
func listenUAPI(name string) (net.Listener, error) {
	return ipc.UAPIListen(name)
}
