// Package instance keeps RunOS Desktop to one instance per user: the first
// launch holds a per-user lock and listens on a per-user socket (a unix
// socket in $XDG_RUNTIME_DIR or the user's cache directory; a named pipe
// on Windows, instance_windows.go); a later launch finds it there, asks it
// to show itself, and exits.
package instance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// ErrRunning is returned by Acquire when another instance runs; it has
// been asked to show itself.
var ErrRunning = errors.New("RunOS Desktop is already running")

// The one-line protocol: the second launch sends "show", the first
// answers "ok <pid>".
const (
	reqShow  = "show"
	respOK   = "ok"
	maxLine  = 128
	ioBudget = 5 * time.Second
)

// Instance is the running first instance.
type Instance struct {
	l       net.Listener
	release func()
	log     *slog.Logger
}

// Acquire makes this process the user's one instance, listening at addr
// (see DefaultAddr). If another instance holds it, Acquire asks that one
// to show itself and returns an error wrapping ErrRunning that names its
// pid.
func Acquire(addr string, log *slog.Logger) (*Instance, error) {
	l, release, err := listen(addr)
	if err == nil {
		return &Instance{l: l, release: release, log: log}, nil
	}
	if !errors.Is(err, errHeld) {
		return nil, fmt.Errorf("single instance at %s: %w", addr, err)
	}
	pid, err := askToShow(addr)
	if err != nil {
		return nil, fmt.Errorf("%w, but it did not answer at %s: %v", ErrRunning, addr, err)
	}
	return nil, fmt.Errorf("%w (pid %d); asked it to show itself", ErrRunning, pid)
}

// errHeld is what listen returns when another instance holds addr.
var errHeld = errors.New("held by another instance")

// Serve answers later launches until ctx ends, calling show for each.
func (i *Instance) Serve(ctx context.Context, pid int, show func()) {
	go func() {
		<-ctx.Done()
		i.l.Close()
	}()
	for {
		c, err := i.l.Accept()
		if err != nil {
			if ctx.Err() == nil {
				i.log.Warn("single instance: accept", "err", err)
			}
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(ioBudget))
			req, err := readLine(c)
			if err != nil {
				i.log.Warn("single instance: bad request", "err", err)
				return
			}
			if req != reqShow {
				i.log.Warn("single instance: unknown request", "request", req)
				fmt.Fprintf(c, "error unknown request\n")
				return
			}
			i.log.Info("another launch asked to show the app")
			fmt.Fprintf(c, "%s %d\n", respOK, pid)
			show()
		}()
	}
}

// Close gives the instance up (the next launch becomes the first).
func (i *Instance) Close() {
	i.l.Close()
	i.release()
}

func askToShow(addr string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ioBudget)
	defer cancel()
	// The first instance may hold the lock a moment before it listens.
	var c net.Conn
	var err error
	for range 10 {
		if c, err = dial(ctx, addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioBudget))
	if _, err := fmt.Fprintf(c, "%s\n", reqShow); err != nil {
		return 0, err
	}
	line, err := readLine(c)
	if err != nil {
		return 0, err
	}
	return parseOK(line)
}

// readLine reads one short line; anything longer or binary is refused.
func readLine(c net.Conn) (string, error) {
	r := bufio.NewReaderSize(c, maxLine)
	line, err := r.ReadSlice('\n')
	if err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

// parseOK reads the first instance's answer, "ok <pid>".
func parseOK(line string) (int, error) {
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != respOK {
		return 0, fmt.Errorf("unexpected answer %q", line)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("unexpected answer %q", line)
	}
	return pid, nil
}
