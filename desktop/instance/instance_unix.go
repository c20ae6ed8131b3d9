//go:build !windows

package instance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DefaultAddr is the per-user socket: $XDG_RUNTIME_DIR/runos-desktop.sock
// (private to the user by the XDG spec), else <user cache dir>/runos/
// desktop.sock (~/Library/Caches on macOS).
func DefaultAddr() (string, error) { return defaultAddr(os.Getenv, os.UserCacheDir) }

func defaultAddr(getenv func(string) string, cacheDir func() (string, error)) (string, error) {
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "runos-desktop.sock"), nil
	}
	d, err := cacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory for the single-instance socket: %w (set XDG_RUNTIME_DIR)", err)
	}
	return filepath.Join(d, "runos", "desktop.sock"), nil
}

// listen takes an exclusive lock on <path>.lock, held for the life of the
// process (the kernel drops it when the process dies, so a crash leaves
// nothing stuck), then listens on path, replacing a dead instance's socket.
func listen(path string) (net.Listener, func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, errHeld
		}
		return nil, nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	_ = os.Remove(path) // we hold the lock: any socket here is a dead instance's
	l, err := net.Listen("unix", path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		f.Close()
		return nil, nil, err
	}
	return l, func() { f.Close() }, nil
}

func dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
