package control

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawTLS opens a TLS connection to control as a hostile client would.
func rawTLS(t *testing.T, base string) (*tls.Conn, error) {
	t.Helper()
	u, _ := url.Parse(base)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", u.Host, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// cut waits for control to end c (EOF, a reset, or an answer saying it
// closes), at most wait; it reports whether it did, and if not what came.
func cut(c net.Conn, wait time.Duration) (bool, string) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		b, _ := io.ReadAll(resp.Body) // all of it: what follows must be the close
		resp.Body.Close()
		if !resp.Close {
			return false, resp.Status + " without closing: " + string(b)
		}
		_, err = c.Read(make([]byte, 1))
	}
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		return false, fmt.Sprintf("still open: %v", err)
	}
	return true, ""
}

// TestSlowBodiesCut: connections that send a request's headers and then
// no body, or a body a byte at a time, are cut once the body deadline
// passes (here 300 ms), and one address never holds more connections than
// its cap: past it a new connection is closed before its TLS handshake.
func TestSlowBodiesCut(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := certFor(t, dir)
	base, _ := run(t, Config{TLSCert: certFile, TLSKey: keyFile, DB: filepath.Join(dir, "control.db"), Seed: world(t, dir),
		BcryptCost: 4, BodyTimeout: 300 * time.Millisecond, MaxConnsPerAddr: 6})

	// Headers promising 100 bytes, then nothing.
	for _, path := range []string{"/oauth/token", "/v1/devices", "/oauth/authorize"} {
		c, err := rawTLS(t, base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: control\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if ok, why := cut(c, 20*time.Second); !ok {
			t.Fatalf("POST %s with no body: %s", path, why)
		}
	}

	// A byte at a time, 100 ms apart: the body would take 10 s.
	c, err := rawTLS(t, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "POST /oauth/token HTTP/1.1\r\nHost: control\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() { ok, _ := cut(c, 30*time.Second); done <- ok }()
	sent := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
drip:
	for ; sent < 100; sent++ {
		select {
		case <-done:
			break drip
		case <-tick.C:
			if _, err := io.WriteString(c, "a"); err != nil {
				break drip
			}
		}
	}
	if sent >= 100 {
		t.Fatal("a body dripped a byte every 100 ms was read to its end: not cut")
	}
	t.Logf("cut after %d of 100 bytes", sent)

	// The cap: six connections held (no request yet), the seventh closed.
	var held []*tls.Conn
	for i := range 6 {
		c, err := rawTLS(t, base)
		if err != nil {
			t.Fatalf("connection %d within the cap: %v", i+1, err)
		}
		held = append(held, c)
	}
	for i := range 3 {
		if c, err := rawTLS(t, base); err == nil {
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatalf("connection %d past the cap of 6 was served", 7+i)
			}
		}
	}
	// One goes: room for one.
	held[0].Close()
	for i := 0; ; i++ {
		c, err := rawTLS(t, base)
		if err == nil {
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: control\r\n\r\n"); err == nil {
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					resp.Body.Close()
					break
				}
			}
			c.Close()
		}
		if i > 500 {
			t.Fatal("no room after a held connection closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHSTS: every HTTPS answer of control says Strict-Transport-Security,
// the API's, the login page's, the console's and the health check's alike.
func TestHSTS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, client := certFor(t, dir)
	base, _ := run(t, Config{TLSCert: certFile, TLSKey: keyFile, DB: filepath.Join(dir, "control.db"), Seed: world(t, dir), BcryptCost: 4})
	for _, path := range []string{"/healthz", "/v1/me", "/oauth/authorize", "/console", "/.well-known/oauth-authorization-server", "/nowhere"} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := resp.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(h, "max-age=") {
			t.Errorf("GET %s (%s): Strict-Transport-Security %q", path, resp.Status, h)
		}
	}
}
