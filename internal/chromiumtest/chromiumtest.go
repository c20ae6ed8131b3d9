// Package chromiumtest runs Debian's Chromium headless for tests, with
// chromedp: a fresh profile, the flags that let it run as root in these
// machines (../shared/TESTING-NOTES.md), trust in exactly one server key
// (its SPKI pinned, nothing else accepted), and optionally every
// connection sent through a dialer of the test's choosing, such as one
// that dials from inside a lab host's network namespace, or Chromium
// itself started inside a lab host's namespaces. It is for tests only.
package chromiumtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Options say what the browser trusts and how it connects.
type Options struct {
	// CertFile is the PEM certificate of the one server to trust (its
	// public key is pinned).
	CertFile string
	// AlsoTrust are more servers' PEM certificates to trust the same way
	// (an identity provider the sign-in goes through).
	AlsoTrust []string
	// Dial, when set, makes every connection of the browser go through an
	// HTTP CONNECT proxy in the test process that dials with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Width and Height of the window; 0: 1280×900.
	Width, Height int
	// Command, when set, changes the command that starts Chromium, such as
	// to run the same argv inside a lab host's namespaces.
	Command func(*exec.Cmd)
	// Output, when set, gets Chromium's own output.
	Output io.Writer
}

// New starts Chromium and returns a chromedp context for one tab; it and
// the browser end with the test.
func New(t testing.TB, o Options) context.Context {
	t.Helper()
	spki, err := pinOf(o.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range o.AlsoTrust {
		pin, err := pinOf(f)
		if err != nil {
			t.Fatal(err)
		}
		spki += "," + pin
	}
	if o.Width == 0 {
		o.Width, o.Height = 1280, 900
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("/usr/bin/chromium"),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", spki),
	)
	if o.Command != nil {
		opts = append(opts, chromedp.ModifyCmdFunc(o.Command))
	}
	if o.Output != nil {
		opts = append(opts, chromedp.CombinedOutput(o.Output))
	}
	if o.Dial != nil {
		addr := startProxy(t, o.Dial)
		opts = append(opts, chromedp.ProxyServer("http://"+addr),
			chromedp.Flag("proxy-bypass-list", "<-loopback>")) // even loopback goes through the proxy
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf), chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil { // start it now: failures are the test's
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// pinOf is the base64 SHA-256 of the certificate's public key, as
// --ignore-certificate-errors-spki-list wants it.
func pinOf(certFile string) (string, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return "", err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", errors.New(certFile + ": no PEM certificate")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// startProxy serves HTTP CONNECT on a loopback port, dialing each tunnel
// with dial. (Chromium speaks only CONNECT to it: the pages are HTTPS.)
func startProxy(t testing.TB, dial func(ctx context.Context, network, addr string) (net.Conn, error)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				tunnel(ctx, c, dial)
			}()
		}
	}()
	return ln.Addr().String()
}

func tunnel(ctx context.Context, c net.Conn, dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	up, err := dial(dctx, "tcp", req.Host)
	cancel()
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	_ = c.SetReadDeadline(time.Time{})
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Navigate is chromedp.Navigate that loads the page again when Chromium
// gave up on it with net::ERR_NETWORK_CHANGED: Chromium aborts a load
// when an address, a link or the resolver changes under it, which in a
// lab host happens whenever the daemon beside it brings its tunnel up or
// points DNS at itself. A person would press reload; so does this, a few
// times.
func Navigate(url string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		var err error
		for range 3 {
			if _, err = chromedp.Navigate(url)(ctx, t); err == nil || !strings.Contains(err.Error(), "ERR_NETWORK_CHANGED") {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		return err
	})
}
