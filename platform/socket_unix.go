//go:build !windows

package platform

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Dial connects to the daemon's local socket.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// Listen creates the daemon's local socket at path, replacing a stale one,
// with its directory created 0755 and the socket itself 0666: every local
// user may connect and read status; who may change state is decided per
// request from the caller's kernel-verified identity.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("socket %s: another daemon is listening", path)
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
