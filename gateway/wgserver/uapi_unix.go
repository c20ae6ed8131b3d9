//go:build linux || darwin || freebsd || openbsd

package wgserver

import (
	"net"

	"golang.zx2c4.com/wireguard/ipc"
)

// listenUAPI opens /var/run/wireguard/<name>.sock, where `wg` and wgctrl
// find the device.
func listenUAPI(name string) (net.Listener, error) {
	f, err := ipc.UAPIOpen(name)
	if err != nil {
		return nil, err
	}
	defer f.Close() // UAPIListen keeps its own copy of the descriptor
	return ipc.UAPIListen(name, f)
}
