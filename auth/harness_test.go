package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth/formlogin"
	"github.com/runos/vpn/control/oauth"
)

const (
	testUser     = "alice@example.com"
	testPassword = "correct horse battery staple"
)

// backend is control's side as far as sign-in needs it: one user, sessions
// of 24 hours.
type backend struct {
	mu       sync.Mutex
	sessions map[string]string
}

func (b *backend) CheckPassword(_ context.Context, email, password string) (bool, error) {
	return email == testUser && password == testPassword, nil
}

func (b *backend) RevokeGrant(context.Context, string) (bool, error) { return false, nil }

func (b *backend) CreateSession(_ context.Context, email, _, _ string) (string, time.Time, error) {
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	tok := hex.EncodeToString(raw)
	b.mu.Lock()
	b.sessions[tok] = email
	b.mu.Unlock()
	return tok, time.Now().Add(24 * time.Hour), nil
}

func (b *backend) user(tok string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[tok]
}

// control is the real authorization server over TLS.
type control struct {
	srv     *httptest.Server
	backend *backend
}

func newControl(t testing.TB, tune func(*oauth.Config)) *control {
	t.Helper()
	c := &control{backend: &backend{sessions: map[string]string{}}}
	var h http.Handler
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	c.srv.StartTLS()
	t.Cleanup(c.srv.Close)
	cfg := oauth.Config{Issuer: c.srv.URL, Backend: c.backend, Store: oauth.NewMemoryStore(), DeviceInterval: time.Second}
	if tune != nil {
		tune(&cfg)
	}
	s, err := oauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h = s.Handler()
	return c
}

func (c *control) flow(opener Opener, out *lines) *Flow {
	return &Flow{Issuer: c.srv.URL, ClientID: api.ClientCLI, HTTPClient: c.srv.Client(), Opener: opener, Out: out}
}

// lines is a Flow.Out that tests can read line by line as it is written.
type lines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	all  []string
	wake chan struct{}
}

func newLines() *lines { return &lines{wake: make(chan struct{}, 1)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		s := l.buf.String()
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		l.all = append(l.all, s[:i])
		l.buf.Next(i + 1)
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// await returns the submatches of the first line matching re, waiting for
// it to be written.
func (l *lines) await(ctx context.Context, re *regexp.Regexp) []string {
	for {
		l.mu.Lock()
		for _, s := range l.all {
			if m := re.FindStringSubmatch(s); m != nil {
				l.mu.Unlock()
				return m
			}
		}
		l.mu.Unlock()
		select {
		case <-l.wake:
		case <-ctx.Done():
			return nil
		}
	}
}

var deviceLine = regexp.MustCompile(`^To sign in, visit (\S+) and enter the code ([A-Z]{4}-[A-Z]{4})$`)

// approveDevice plays the user of a device sign-in: it reads the URL and
// code the flow printed and signs in through the page.
func approveDevice(ctx context.Context, t *testing.T, c *control, out *lines, password string) chan error {
	done := make(chan error, 1)
	go func() {
		m := out.await(ctx, deviceLine)
		if m == nil {
			done <- ctx.Err()
			return
		}
		u := m[1] + "?" + url.Values{"user_code": {m[2]}}.Encode()
		_, err := formlogin.Login(ctx, c.srv.Client(), u, testUser, password)
		done <- err
	}()
	return done
}

// formOpener is a "browser" that signs in through the real login page
// with auth/formlogin, as the lab's scripted browser does.
type formOpener struct {
	client   *http.Client
	password string
	mu       sync.Mutex
	urls     []string
	result   *formlogin.Result
	err      error
	done     chan struct{}
}

func newFormOpener(c *control, password string) *formOpener {
	return &formOpener{client: c.srv.Client(), password: password, done: make(chan struct{})}
}

func (o *formOpener) Open(u string) error {
	o.mu.Lock()
	o.urls = append(o.urls, u)
	o.mu.Unlock()
	go func() {
		res, err := formlogin.Login(context.Background(), o.client, u, testUser, o.password)
		o.mu.Lock()
		o.result, o.err = res, err
		o.mu.Unlock()
		close(o.done)
	}()
	return nil
}

func (o *formOpener) wait() (*formlogin.Result, error) {
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.result, o.err
}

// writeCA saves the test server's certificate as a PEM CA file.
func writeCA(t *testing.T, c *control) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw})
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func clientTrusting(caFile string) (*http.Client, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("no certificate in " + caFile)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, nil
}
