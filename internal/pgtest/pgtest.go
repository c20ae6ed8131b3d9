// Package pgtest starts a real PostgreSQL server (Debian's, run as the
// postgres user) for tests: a fresh cluster in a temporary directory,
// serving only a private socket directory, stopped and removed when the
// test ends. Each test takes its own database with NewDatabase.
//
// It is for tests only; the lab's database host uses internal/pgserver.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runos/vpn/internal/pgserver"
	"github.com/runos/vpn/internal/testenv"
)

// Server is a PostgreSQL server of one test.
type Server struct {
	dir, data, sock, bin string
	acct                 pgserver.Account
	port                 int
	t                    testing.TB

	mu  sync.Mutex
	cmd *exec.Cmd
	log *os.File
}

// Require skips the test unless it can run a PostgreSQL server: Linux,
// root (to run it as the postgres user) and Debian's postgresql package.
// Under RUNOS_E2E=1 a missing requirement fails the test instead
// (internal/testenv).
func Require(t testing.TB) {
	t.Helper()
	testenv.Root(t, "PostgreSQL servers (run as the postgres user)")
	if _, err := pgserver.BinDir(); err != nil {
		testenv.Skip(t, "needs "+err.Error())
	} else if _, err := pgserver.PostgresAccount(); err != nil {
		testenv.Skip(t, "needs "+err.Error())
	}
}

// Start makes and starts a server for t (skipping or failing as Require
// does); it is stopped and its directory removed when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	Require(t)
	bin, _ := pgserver.BinDir()
	acct, _ := pgserver.PostgresAccount()
	// Not t.TempDir(): the postgres user must be able to reach it.
	dir, err := os.MkdirTemp("", "runos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{dir: dir, data: filepath.Join(dir, "data"), sock: filepath.Join(dir, "sock"), bin: bin, acct: acct, port: 5432, t: t}
	if err := os.Mkdir(s.sock, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(s.sock, acct.UID, acct.GID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := pgserver.InitDB(ctx, bin, s.data, acct); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	return s
}

// URL is the connection URL of database db (the socket directory as host).
func (s *Server) URL(db string) string {
	q := url.Values{"host": {s.sock}, "port": {fmt.Sprint(s.port)}}
	return "postgres://postgres@/" + db + "?" + q.Encode()
}

// NewDatabase creates an empty database for one test and returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return s.URL(name)
}

// Stop shuts the server down (a fast shutdown: open connections are cut)
// and waits for it; Resume starts it again on the same data.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
	s.log.Close()
}

// Resume starts the server (again) and returns once it accepts connections.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	lf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := pgserver.ServerArgs(s.bin, s.data, s.sock, "", s.port, false)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = asUser(s.acct)
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	s.cmd, s.log = cmd, lf
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			c.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			return fmt.Errorf("postgres did not accept connections within 60 s: %v\n%s", err, strings.TrimSpace(string(b)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
