//go:build !windows

package vpnd

import (
	"net"
	"os"
	"path/filepath"
	"time"
)

// wireguard-go's UAPI sockets, shared by every WireGuard process.
const uapiDir = "/var/run/wireguard"

func uapiPath(name string) string { return filepath.Join(uapiDir, name+".sock") }

// uapiAlive reports whether a live process serves the interface's UAPI socket.
func uapiAlive(name string) bool {
	c, err := net.DialTimeout("unix", uapiPath(name), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// removeStaleSocket removes the local API socket a crashed daemon left
// (only a socket: a path given by mistake is never deleted).
func removeStaleSocket(path string) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
}

// removeStaleUAPI removes the socket file a crashed daemon left.
func removeStaleUAPI(name string) { _ = os.Remove(uapiPath(name)) }
