package auth

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/control/oauth"
)

var visitLine = regexp.MustCompile(`^If it does not open, visit: (\S+)$`)

// redirectOf returns the loopback redirect URI inside a printed authorize URL.
func redirectOf(t *testing.T, out *lines) *url.URL {
	t.Helper()
	m := out.await(t.Context(), visitLine)
	if m == nil {
		t.Fatalf("no URL printed: %q", out.String())
	}
	au, err := url.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	ru, err := url.Parse(au.Query().Get("redirect_uri"))
	if err != nil {
		t.Fatal(err)
	}
	return ru
}

func assertClosed(t *testing.T, redirect *url.URL) {
	t.Helper()
	if c, err := net.DialTimeout("tcp", redirect.Host, time.Second); err == nil {
		c.Close()
		t.Fatalf("the loopback listener %s is still open", redirect.Host)
	}
}

func TestSignInBrowser(t *testing.T) {
	c := newControl(t, nil)
	opener, out := newFormOpener(c, testPassword), newLines()
	tok, err := c.flow(opener, out).SignInBrowser(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.backend.user(tok.AccessToken) != testUser {
		t.Fatalf("token %q is no session of alice", tok.AccessToken)
	}
	if d := time.Until(tok.ExpiresAt); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("expires in %v, want 24h", d)
	}
	if !strings.HasPrefix(out.String(), "Opening your browser to sign in…\nIf it does not open, visit: "+c.srv.URL+"/oauth/authorize?") {
		t.Errorf("printed %q", out.String())
	}
	res, err := opener.wait()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Body, "Signed in, you can close this tab.") || !strings.HasPrefix(res.URL, "http://127.0.0.1:") {
		t.Errorf("the browser ended on %s: %q", res.URL, res.Body)
	}
	// What was opened: PKCE S256, a loopback IP redirect, a state.
	au, _ := url.Parse(opener.urls[0])
	q := au.Query()
	if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 || q.Get("state") == "" ||
		!strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") || q.Get("client_id") != "runos-cli" {
		t.Errorf("authorize URL %s", opener.urls[0])
	}
	assertClosed(t, redirectOf(t, out))
}

// A wrong password is shown in the browser; the flow keeps waiting (the
// user can try again there) until its context ends, and then nothing is
// left listening.
func TestSignInBrowserWrongPasswordThenCancel(t *testing.T) {
	c := newControl(t, nil)
	opener, out := newFormOpener(c, "wrong"), newLines()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.flow(opener, out).SignInBrowser(ctx)
		errc <- err
	}()
	_, berr := opener.wait()
	if berr == nil || !strings.Contains(berr.Error(), "Wrong email or password.") {
		t.Fatalf("the browser saw %v, want the page's wrong-password message", berr)
	}
	redirect := redirectOf(t, out)
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped before it finished") {
		t.Fatalf("got %v", err)
	}
	assertClosed(t, redirect)
}

// browseTo is a "browser" that just follows the URL, edited by edit, to
// wherever control redirects it, and records the last page.
type browseTo struct {
	client *http.Client
	edit   func(url.Values)
	page   chan string
}

func (b *browseTo) Open(u string) error {
	au, _ := url.Parse(u)
	q := au.Query()
	b.edit(q)
	au.RawQuery = q.Encode()
	go func() {
		resp, err := b.client.Get(au.String())
		if err != nil {
			b.page <- err.Error()
			return
		}
		defer resp.Body.Close()
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		b.page <- sb.String()
	}()
	return nil
}

// An error control redirects back is shown in the browser and returned.
func TestSignInBrowserServerError(t *testing.T) {
	c := newControl(t, nil)
	b := &browseTo{client: c.srv.Client(), page: make(chan string, 1), edit: func(q url.Values) { q.Set("code_challenge_method", "plain") }}
	_, err := c.flow(b, newLines()).SignInBrowser(t.Context())
	if err == nil || !strings.Contains(err.Error(), "control refused the sign-in: invalid_request: PKCE is required") {
		t.Fatalf("got %v", err)
	}
	if p := <-b.page; !strings.Contains(p, "Sign-in failed") || !strings.Contains(p, "PKCE is required") {
		t.Fatalf("browser page: %s", p)
	}
}

// A forged answer with the wrong state is turned away and the real sign-in
// still completes.
func TestSignInBrowserWrongState(t *testing.T) {
	c := newControl(t, nil)
	real := newFormOpener(c, testPassword)
	forged := make(chan int, 1)
	opener := openerFunc(func(u string) error {
		au, _ := url.Parse(u)
		ru := au.Query().Get("redirect_uri")
		resp, err := http.Get(ru + "?code=forged&state=guess")
		if err != nil {
			return err
		}
		resp.Body.Close()
		forged <- resp.StatusCode
		return real.Open(u)
	})
	tok, err := c.flow(opener, newLines()).SignInBrowser(t.Context())
	if err != nil || c.backend.user(tok.AccessToken) != testUser {
		t.Fatalf("got %v, %v", tok, err)
	}
	if s := <-forged; s != http.StatusBadRequest {
		t.Fatalf("forged answer got %d", s)
	}
}

type openerFunc func(string) error

func (f openerFunc) Open(u string) error { return f(u) }

// A code that cannot be exchanged (here: already expired) fails the flow
// with the server's reason, shown in the browser too.
func TestSignInBrowserExchangeFails(t *testing.T) {
	c := newControl(t, func(cfg *oauth.Config) { cfg.CodeTTL = time.Nanosecond })
	opener := newFormOpener(c, testPassword)
	_, err := c.flow(opener, newLines()).SignInBrowser(t.Context())
	if err == nil || !strings.Contains(err.Error(), "exchange the code at "+c.srv.URL+"/oauth/token: invalid_grant: the code expired") {
		t.Fatalf("got %v", err)
	}
	if _, berr := opener.wait(); berr == nil || !strings.Contains(berr.Error(), "Sign-in failed") && !strings.Contains(berr.Error(), "could not sign you in") {
		t.Fatalf("the browser saw %v", berr)
	}
}

func TestSignInDevice(t *testing.T) {
	c := newControl(t, nil)
	out := newLines()
	approved := approveDevice(t.Context(), t, c, out, testPassword)
	tok, err := c.flow(nil, out).SignInDevice(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := <-approved; err != nil {
		t.Fatal(err)
	}
	if c.backend.user(tok.AccessToken) != testUser || tok.ExpiresAt.IsZero() {
		t.Fatalf("token %+v", tok)
	}
	if m := deviceLine.FindStringSubmatch(out.String()); m == nil || m[1] != c.srv.URL+"/oauth/device" {
		t.Fatalf("printed %q", out.String())
	}
}

func TestSignInDeviceExpires(t *testing.T) {
	c := newControl(t, func(cfg *oauth.Config) { cfg.DeviceCodeTTL = 2 * time.Second })
	_, err := c.flow(nil, newLines()).SignInDevice(t.Context())
	if err == nil || !strings.Contains(err.Error(), "expired before it was approved") {
		t.Fatalf("got %v", err)
	}
}

func TestSignInDeviceCancelled(t *testing.T) {
	c := newControl(t, nil)
	out := newLines()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		out.await(ctx, deviceLine)
		cancel()
	}()
	_, err := c.flow(nil, out).SignInDevice(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// SignIn: the browser when it can, else the device grant.
func TestSignInChoosesGrant(t *testing.T) {
	c := newControl(t, nil)
	t.Run("browser", func(t *testing.T) {
		opener, out := newFormOpener(c, testPassword), newLines()
		if _, err := c.flow(opener, out).SignIn(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "To sign in, visit") {
			t.Fatalf("device grant used: %q", out.String())
		}
	})
	for name, tc := range map[string]struct {
		opener    Opener
		noBrowser bool
		say       string
	}{
		"no-browser flag": {opener: openerFunc(func(string) error { t.Error("opened a browser"); return nil }), noBrowser: true},
		"no opener":       {},
		"opener fails":    {opener: openerFunc(func(string) error { return errors.New("no display") }), say: "Could not open a browser (no display); signing in with a code instead."},
		"headless":        {opener: SystemOpener(func(k string) string { return map[string]string{"SSH_CONNECTION": "198.51.100.7 50000 10.0.0.2 22"}[k] })},
		"browser exits 1": {opener: SystemOpener(func(k string) string { return map[string]string{"BROWSER": "false"}[k] }), say: "Could not open a browser (BROWSER=\"false\": exit status 1); signing in with a code instead."},
	} {
		t.Run(name, func(t *testing.T) {
			out := newLines()
			approved := approveDevice(t.Context(), t, c, out, testPassword)
			tok, err := c.flow(tc.opener, out).SignIn(t.Context(), tc.noBrowser)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-approved; err != nil || c.backend.user(tok.AccessToken) != testUser {
				t.Fatalf("approve: %v", err)
			}
			if tc.say != "" && !strings.Contains(out.String(), tc.say) {
				t.Errorf("printed %q, want %q", out.String(), tc.say)
			}
			if tc.say == "" && (strings.Contains(out.String(), "browser") || strings.Count(out.String(), "To sign in, visit") != 1) {
				t.Errorf("printed %q, want the code once and no word of a browser", out.String())
			}
		})
	}
}

func TestFlowConfigErrors(t *testing.T) {
	for _, f := range []*Flow{{Issuer: "not a url", ClientID: "runos-cli"}, {Issuer: "https://x.example"}} {
		if _, err := f.SignInDevice(t.Context()); err == nil {
			t.Errorf("%+v: no error", f)
		}
	}
}
