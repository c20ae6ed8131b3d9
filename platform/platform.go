// Package platform holds per-OS facts behind one small API: default paths,
// the local socket (listen, dial, the caller's kernel-verified identity), and
// the tunnel interface's addresses and routes. Callers never branch on
// runtime.GOOS; each OS has its own _linux.go, _darwin.go, _windows.go file.
package platform

import "os"

// EnvSocket overrides the daemon's socket path for both daemon and clients.
const EnvSocket = "RUNOS_VPND_SOCKET"

// EnvStateDir is the default of `runos vpnd --state-dir` (the lab sets it,
// so that `runos vpnd --cleanup` there finds the lab daemon's state).
const EnvStateDir = "RUNOS_VPND_STATE_DIR"

// SocketPath returns the local API socket path: $RUNOS_VPND_SOCKET, else the
// OS default.
func SocketPath() string {
	if p := os.Getenv(EnvSocket); p != "" {
		return p
	}
	return DefaultSocketPath
}
