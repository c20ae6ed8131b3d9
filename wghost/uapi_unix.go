//go:build !windows

package wghost

import (
	"net"

	"golang.zx2c4.com/wireguard/ipc"
)

// listenUAPI opens /var/run/wireguard/<name>.sock, where the stock wg tool
// and wgctrl find the device; a stale socket from a crash is replaced, a
// live one (another process owns the name) is an error.
func listenUAPI(name string) (net.Listener, error) {
	f, err := ipc.UAPIOpen(name)
	if err != nil {
		return nil, err
	}
	defer f.Close() // UAPIListen works on its own copy
	return ipc.UAPIListen(name, f)
}
