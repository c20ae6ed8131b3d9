package vpnd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCleanup(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "vpnd.sock")
	ran := 0
	cfg := Config{StateDir: filepath.Join(dir, "state"), Socket: sock, Interface: fmt.Sprintf("wgc%06x", rand.Uint32()&0xffffff),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cleanup: func(string, *slog.Logger) error { ran++; return nil }}

	// A running daemon is not cleaned up under its feet.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := Cleanup(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "the daemon is running") {
		t.Fatalf("cleanup with a live daemon: %v", err)
	}
	if ran != 0 {
		t.Error("the DNS clean-up ran under a live daemon")
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // a crash: the socket file stays

	if err := Cleanup(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if ran != 1 {
		t.Errorf("the DNS clean-up ran %d times", ran)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("the stale socket is left")
	}
	// A path that is not a socket is never removed.
	os.WriteFile(sock, []byte("x"), 0o600)
	if err := Cleanup(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); err != nil {
		t.Error("Cleanup removed a file that is not a socket")
	}
}
