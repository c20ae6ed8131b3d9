package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/internal/testenv"
	"github.com/runos/vpn/vpnd"
)

// memKeystore is an in-memory keystore: tests never touch the user's keychain.
type memKeystore struct {
	mu sync.Mutex
	m  map[string]string
}

func (k *memKeystore) Get(a string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[a]
	if !ok {
		return "", auth.ErrNotFound
	}
	return v, nil
}

func (k *memKeystore) Set(a, s string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[a] = s
	return nil
}

func (k *memKeystore) Delete(a string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, a)
	return nil
}

// recordingDaemon stands in for vpnd.Run to check the flags' mapping.
type recordingDaemon struct {
	runs, cleanups []vpnd.Config
}

func (d *recordingDaemon) Run(_ context.Context, cfg vpnd.Config) error {
	d.runs = append(d.runs, cfg)
	return nil
}

func (d *recordingDaemon) Cleanup(_ context.Context, cfg vpnd.Config) error {
	d.cleanups = append(d.cleanups, cfg)
	return nil
}

// signInCall is what a sign-in was asked to do.
type signInCall struct {
	issuer, clientID string
	noBrowser        bool
	hadOpener        bool
}

// harness runs the real cobra tree against a fake daemon and a fake control.
type harness struct {
	tty     *bytes.Buffer // non-nil: stdin and stderr are a terminal, and this is what the user types
	t       *testing.T
	env     map[string]string
	now     time.Time
	daemon  *fakeDaemon
	control *fakeControl
	ks      *memKeystore
	vpnd    *recordingDaemon
	dir     string
	stdin   string // what the command reads from standard input

	mu       sync.Mutex
	signIns  []signInCall
	signInOK func(f *auth.Flow) (*auth.Token, error) // nil: a fresh token for alice
	tokenN   int
	real     bool // the real auth.Flow and opener (see realSignIn)
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{
		t:       t,
		now:     time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC),
		daemon:  newFakeDaemon(t),
		control: newFakeControl(t),
		ks:      &memKeystore{m: map[string]string{}},
		vpnd:    &recordingDaemon{},
		dir:     t.TempDir(),
	}
	h.env = map[string]string{
		"RUNOS_CONFIG":      filepath.Join(h.dir, "runos", "config.json"),
		"RUNOS_VPND_SOCKET": h.daemon.socket,
		"RUNOS_API_URL":     h.control.URL(),
		"RUNOS_CA_FILE":     h.control.caFile,
	}
	return h
}

func (h *harness) signIn(ctx context.Context, f *auth.Flow, noBrowser bool) (*auth.Token, error) {
	h.mu.Lock()
	h.signIns = append(h.signIns, signInCall{issuer: f.Issuer, clientID: f.ClientID, noBrowser: noBrowser, hadOpener: f.Opener != nil})
	h.tokenN++
	n := h.tokenN
	custom := h.signInOK
	h.mu.Unlock()
	if custom != nil {
		return custom(f)
	}
	if noBrowser {
		fmt.Fprintf(f.Out, "To sign in, open %s/oauth/device and enter the code WDJB-MJHT\n", f.Issuer)
	} else {
		fmt.Fprintf(f.Out, "Opening %s/oauth/authorize?... in your browser\n", f.Issuer)
	}
	tok := fmt.Sprintf("tok%d", n)
	h.control.addToken(tok, "alice@example.com", true)
	return &auth.Token{AccessToken: tok, ExpiresAt: h.now.Add(24 * time.Hour)}, nil
}

// result is one run of the command.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

func (h *harness) run(args ...string) result {
	h.t.Helper()
	var out, errb bytes.Buffer
	env := Env{
		Stdout:        &out,
		Stderr:        &errb,
		Stdin:         strings.NewReader(h.stdin),
		Getenv:        func(k string) string { return h.env[k] },
		Now:           func() time.Time { return h.now },
		UserConfigDir: func() (string, error) { return "", errors.New("tests set RUNOS_CONFIG") },
		IsTerminal:    func(io.Writer) bool { return h.tty != nil },
		Opener:        openerFunc(func(string) error { return errors.New("no browser in tests") }),
		Keystore:      func(string) Keystore { return h.ks },
		Daemon:        h.vpnd,
		signIn:        h.signIn,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if h.real {
		env.Opener, env.signIn = nil, nil
	}
	if h.tty != nil {
		env.Stdin = h.tty
	}
	code := Main(ctx, args, env)
	r := result{stdout: out.String(), stderr: errb.String(), code: code}
	h.t.Logf("runos %s\n%s", strings.Join(args, " "), r)
	return r
}

type openerFunc func(string) error

func (f openerFunc) Open(u string) error { return f(u) }

// want checks the exit code and that stdout/stderr contain the given texts.
func (r result) want(t *testing.T, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d\n%s", r.code, code, r)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q\n%s", s, r)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q\n%s", s, r)
		}
	}
}

// realSignIn makes the harness use the real auth.Flow and auth.SystemOpener
// with $BROWSER set to a script that plays the browser with curl: it
// follows control's redirect to the CLI's loopback listener.
func (h *harness) realSignIn(t *testing.T) {
	t.Helper()
	testenv.Tools(t, "curl") // it plays the browser
	script := filepath.Join(h.dir, "browser")
	body := "#!/bin/sh\nexec curl -sS -L --cacert " + h.control.caFile + " -o /dev/null \"$1\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	h.env["BROWSER"] = script
	h.real = true
}
