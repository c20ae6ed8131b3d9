//go:build !windows

package instance

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func addr(t *testing.T) string {
	// Short: unix socket paths are limited to about 100 bytes.
	d, err := os.MkdirTemp("", "rdi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "desktop.sock")
}

func TestSecondLaunchAsksTheFirstToShow(t *testing.T) {
	a := addr(t)
	first, err := Acquire(a, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shown := make(chan struct{}, 2)
	go first.Serve(ctx, 4242, func() { shown <- struct{}{} })

	_, err = Acquire(a, slog.Default())
	if !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), "pid 4242") {
		t.Fatalf("second Acquire: %v", err)
	}
	<-shown
	if fi, err := os.Stat(a); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}

	// Once the first quits, the next launch is the first.
	cancel()
	first.Close()
	again, err := Acquire(a, slog.Default())
	if err != nil {
		t.Fatalf("after the first quit: %v", err)
	}
	again.Close()
}

func TestStaleSocketOfACrashedInstance(t *testing.T) {
	a := addr(t)
	// A socket file with nobody holding the lock, as a killed app leaves.
	l, err := net.Listen("unix", a)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	in, err := Acquire(a, slog.Default())
	if err != nil {
		t.Fatalf("stale socket blocked the launch: %v", err)
	}
	in.Close()
}

func TestBadRequestShowsNothing(t *testing.T) {
	a := addr(t)
	first, err := Acquire(a, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shown := make(chan struct{}, 1)
	go first.Serve(ctx, 1, func() { shown <- struct{}{} })
	for _, req := range []string{"hello\n", strings.Repeat("x", 4096) + "\n"} {
		c, err := net.Dial("unix", a)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(req))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 64)
		n, _ := c.Read(b)
		c.Close()
		if strings.HasPrefix(string(b[:n]), "ok") {
			t.Fatalf("request %.10q answered %q", req, b[:n])
		}
	}
	select {
	case <-shown:
		t.Fatal("a bad request showed the app")
	default:
	}
}

func TestDefaultAddr(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cache := func() (string, error) { return "/home/ana/.cache", nil }
	if a, _ := defaultAddr(env(map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}), cache); a != "/run/user/1000/runos-desktop.sock" {
		t.Fatalf("got %q", a)
	}
	if a, _ := defaultAddr(env(nil), cache); a != "/home/ana/.cache/runos/desktop.sock" {
		t.Fatalf("got %q", a)
	}
	if _, err := defaultAddr(env(nil), func() (string, error) { return "", errors.New("no HOME") }); err == nil {
		t.Fatal("no error without a directory")
	}
}
