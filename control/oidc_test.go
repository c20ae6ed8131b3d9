package control_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/control"
	"github.com/runos/vpn/control/controltest"
	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/internal/oidctest"
	"github.com/runos/vpn/internal/testcert"
)

// oidcWorld is control configured against a real OpenID Connect provider
// (internal/oidctest) for account rjwrn, which has groups oncall and staff.
type oidcWorld struct {
	ctl    *controltest.Control
	idp    *oidctest.Provider
	client *http.Client // trusts both control and the provider
	ops    *api.Client
}

const idpSecret = "s3cret-of-control"

func startOIDC(t *testing.T, secret string) *oidcWorld {
	t.Helper()
	return startOIDCWorld(t, secret, controltest.World())
}

// startOIDCWorld is startOIDC with another world file.
func startOIDCWorld(t *testing.T, secret string, world api.World) *oidcWorld {
	t.Helper()
	return startOIDCWorldWith(t, secret, world, func(*control.Config) {})
}

// startOIDCWorldWith is startOIDCWorld with more configuration.
func startOIDCWorldWith(t *testing.T, secret string, world api.World, more func(*control.Config)) *oidcWorld {
	t.Helper()
	w := &oidcWorld{}
	idpCert := testcert.New(t)
	w.ctl = controltest.Start(t, more, func(cfg *control.Config) {
		b, _ := json.Marshal(world)
		if err := os.WriteFile(cfg.Seed, b, 0o600); err != nil {
			t.Fatal(err)
		}
		w.idp = oidctest.Serve(t, idpCert,
			[]oidctest.Client{{ID: "runos-control", Secret: idpSecret, RedirectURIs: []string{cfg.Issuer + oauth.PathOIDCCallback}}},
			[]oidctest.User{{Email: "Ada@example.com", Password: "ada-pw", Groups: []string{"oncall", "staff", "not-in-runos"}}})
		file := filepath.Join(t.TempDir(), "client-secret")
		if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.OIDC.Issuer, cfg.OIDC.ClientID, cfg.OIDC.ClientSecretFile = w.idp.Issuer, "runos-control", file
		cfg.OIDC.GroupsClaim = "groups"
		cfg.OIDCAccount = "rjwrn"
		cfg.OIDCClient = idpCert.Client()
	})
	roots := x509.NewCertPool()
	ca, err := os.ReadFile(w.ctl.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots.AppendCertsFromPEM(ca)
	roots.AppendCertsFromPEM(idpCert.CertPEM)
	w.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	w.ops = w.ctl.API(controltest.OperatorToken)
	for _, g := range []string{"oncall", "staff"} {
		if _, err := w.ops.CreateGroup(context.Background(), "rjwrn", g); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// upstreamOpener is the browser of `runos vpn up`: on control's login page
// it presses "Sign in with …", fills in the provider's login form, and
// follows the redirects back to control and on to the CLI's loopback.
type upstreamOpener struct {
	w               *oidcWorld
	email, password string
	errc            chan error
	cancel          context.CancelFunc // the CLI's wait, when the browser got stuck
}

func (o *upstreamOpener) Open(u string) error {
	go func() {
		err := o.w.browse(u, o.email, o.password)
		if err != nil {
			o.cancel()
		}
		o.errc <- err
	}()
	return nil
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)

// browse signs in at control's authorize URL u through the provider.
func (w *oidcWorld) browse(u, email, password string) error {
	jar, _ := cookiejar.New(nil)
	b := *w.client
	b.Jar = jar
	page, final, csp, err := get(&b, u)
	if err != nil {
		return err
	}
	// The form's answer redirects to the provider: a browser follows it
	// only if the page's form-action allows the provider's origin.
	if !strings.Contains(csp, "form-action 'self' http://127.0.0.1:") || !strings.Contains(csp, " "+w.idp.Issuer+";") {
		return fmt.Errorf("login page's Content-Security-Policy does not let the form go to the provider %s: %s", w.idp.Issuer, csp)
	}
	if !strings.Contains(page, `value="upstream"`) || !strings.Contains(page, "Sign in with 127.0.0.1") {
		return fmt.Errorf("control's login page offers no identity provider:\n%s", page)
	}
	_, err = w.throughProvider(&b, final.Scheme+"://"+final.Host+"/oauth/authorize", page, nil, email, password)
	return err
}

// throughProvider presses "Sign in with …" on control's page (posting its
// hidden fields and extra to action), signs in at the provider, and
// returns the page the redirects back through control end at.
func (w *oidcWorld) throughProvider(b *http.Client, action, page string, extra url.Values, email, password string) (string, error) {
	form := url.Values{"action": {"upstream"}}
	for _, m := range hiddenInput.FindAllStringSubmatch(page, -1) {
		form.Set(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	for k, v := range extra {
		form[k] = v
	}
	resp, err := b.PostForm(action, form)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	at := resp.Request.URL
	if !strings.HasPrefix(at.String(), w.idp.Issuer+"/login/username") {
		return "", fmt.Errorf("pressing Sign in with the provider led to %s (%s)", at, resp.Status)
	}
	resp, err = b.PostForm(w.idp.Issuer+"/login/username", url.Values{"id": {at.Query().Get("authRequestID")},
		"username": {email}, "password": {password}})
	if err != nil {
		return "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("after the provider's login: %s at %s: %s", resp.Status, resp.Request.URL, body)
	}
	return string(body), nil
}

func get(c *http.Client, u string) (page string, at *url.URL, csp string, err error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", nil, "", fmt.Errorf("GET %s: %s %v: %s", u, resp.Status, err, b)
	}
	return string(b), resp.Request.URL, resp.Header.Get("Content-Security-Policy"), nil
}

// signIn runs `runos vpn up`'s browser sign-in (authorization code with
// PKCE to a loopback listener) through the provider.
func (w *oidcWorld) signIn(t *testing.T, email, password string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := &upstreamOpener{w: w, email: email, password: password, errc: make(chan error, 1), cancel: cancel}
	flow := &auth.Flow{Issuer: w.ctl.URL, ClientID: api.ClientCLI, HTTPClient: w.client, Opener: o, Out: io.Discard}
	tok, err := flow.SignInBrowser(ctx)
	if berr := <-o.errc; berr != nil {
		return "", errors.Join(berr, err)
	}
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

func (w *oidcWorld) groupsOf(t *testing.T, email string) []string {
	t.Helper()
	gs, err := w.ops.Groups(context.Background(), "rjwrn")
	if err != nil {
		t.Fatal(err)
	}
	var of []string
	for _, g := range gs {
		if slices.Contains(g.Members, email) {
			of = append(of, g.Name)
		}
	}
	return of
}

func TestSignInThroughIdentityProvider(t *testing.T) {
	w := startOIDC(t, idpSecret)
	ctx := context.Background()

	// First sign-in: the user is created in rjwrn, in the groups of the
	// claim that RunOS has (not-in-runos is left out).
	tok, err := w.signIn(t, "ada@example.com", "ada-pw")
	if err != nil {
		t.Fatal(err)
	}
	me, err := w.ctl.API(tok).Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if me.User != "ada@example.com" || !slices.Equal(me.Accounts, []string{"rjwrn"}) || me.Operator {
		t.Fatalf("signed in as %+v, want a new plain user ada@example.com of rjwrn", me)
	}
	if got := w.groupsOf(t, "ada@example.com"); !slices.Equal(got, []string{"oncall", "staff"}) {
		t.Fatalf("groups after the first sign-in: %v, want [oncall staff]", got)
	}

	// The provider moves her out of staff: the next sign-in follows.
	w.idp.AddUser(oidctest.User{Email: "Ada@example.com", Password: "ada-pw", Groups: []string{"oncall"}})
	tok2, err := w.signIn(t, "ada@example.com", "ada-pw")
	if err != nil {
		t.Fatal(err)
	}
	if me, err := w.ctl.API(tok2).Me(ctx); err != nil || me.User != "ada@example.com" {
		t.Fatalf("second sign-in: %+v, %v", me, err)
	}
	if got := w.groupsOf(t, "ada@example.com"); !slices.Equal(got, []string{"oncall"}) {
		t.Fatalf("groups after the second sign-in: %v, want [oncall]", got)
	}

	// A wrong password at the provider never comes back to control.
	if _, err := w.signIn(t, "ada@example.com", "wrong"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong password at the provider: %v, want the provider's 401", err)
	}
}

func TestIdentityProviderCallbackRefusals(t *testing.T) {
	// Control's client secret is not the provider's: the code exchange
	// fails and no user is created.
	w := startOIDC(t, "not-the-secret")
	if _, err := w.signIn(t, "ada@example.com", "ada-pw"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("sign-in with a wrong client secret: %v, want refused (403)", err)
	}
	if got := w.groupsOf(t, "ada@example.com"); len(got) != 0 {
		t.Fatalf("a refused sign-in left groups %v", got)
	}

	// A callback with a state control never issued is refused on a page.
	resp, err := w.client.Get(w.ctl.URL + oauth.PathOIDCCallback + "?state=forged&code=whatever")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "not known here") {
		t.Fatalf("unknown state: %s\n%s", resp.Status, body)
	}
	assertNoUser(t, w, "ada@example.com")

	// The provider's answer opened in another browser than the one that
	// pressed "Sign in with …" (a link sent to someone): refused, as the
	// sign-in it belongs to is kept in the first browser alone.
	w2 := startOIDC(t, idpSecret)
	cb, first := w2.callbackOfSignIn(t, "ada@example.com", "ada-pw")
	resp, err = w2.client.Get(cb)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "not known here") {
		t.Fatalf("the callback in another browser: %s\n%s", resp.Status, body)
	}
	assertNoUser(t, w2, "ada@example.com")
	// In the browser that started it, the same answer signs in.
	first.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err = first.Get(cb)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "http://127.0.0.1:9/callback?code=") {
		t.Fatalf("the callback in the browser that started it: %s, Location %q", resp.Status, loc)
	}
}

// callbackOfSignIn signs in through the provider in a browser that stops
// at the provider's redirect back to control, and returns that URL and
// the browser.
func (w *oidcWorld) callbackOfSignIn(t *testing.T, email, password string) (string, *http.Client) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := *w.client
	b.Jar = jar
	b.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == oauth.PathOIDCCallback {
			return http.ErrUseLastResponse
		}
		return nil
	}
	q := url.Values{"client_id": {api.ClientCLI}, "redirect_uri": {"http://127.0.0.1:9/callback"}, "response_type": {"code"},
		"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}, "state": {"app-state"}}
	page, _, _, err := get(&b, w.ctl.URL+api.PathAuthorize+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"action": {"upstream"}}
	for _, m := range hiddenInput.FindAllStringSubmatch(page, -1) {
		form.Set(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	resp, err := b.PostForm(w.ctl.URL+api.PathAuthorize, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = b.PostForm(w.idp.Issuer+"/login/username", url.Values{"id": {resp.Request.URL.Query().Get("authRequestID")},
		"username": {email}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(cb, w.ctl.URL+oauth.PathOIDCCallback+"?") {
		t.Fatalf("the provider did not send the browser back to control: %s, Location %q", resp.Status, cb)
	}
	return cb, &b
}

// assertNoUser checks that control never took email in: creating a user
// and setting their groups are in the audit log.
func assertNoUser(t *testing.T, w *oidcWorld, email string) {
	t.Helper()
	page, err := w.ctl.API(controltest.OperatorToken).Audit(context.Background(), api.AuditQuery{AID: "rjwrn"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Entries {
		if strings.Contains(e.Target+e.Outcome, email) {
			t.Fatalf("the audit log names %s after refused sign-ins: %+v", email, e)
		}
	}
}

var deviceLine = regexp.MustCompile(`To sign in, visit (\S+) and enter the code ([A-Z]{4}-[A-Z]{4})`)

// The device code (`runos vpn up --no-browser`): the code entered on the
// device page, then the provider's login, then the same approval.
func TestDeviceSignInThroughIdentityProvider(t *testing.T) {
	w := startOIDC(t, idpSecret)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	defer pr.Close()
	browser := make(chan error, 1)
	go func() { browser <- w.approveDevice(ctx, cancel, pr) }()
	flow := &auth.Flow{Issuer: w.ctl.URL, ClientID: api.ClientCLI, HTTPClient: w.client, Out: pw}
	tok, err := flow.SignInDevice(ctx)
	if berr := <-browser; berr != nil {
		t.Fatal(berr)
	}
	if err != nil {
		t.Fatal(err)
	}
	me, err := w.ctl.API(tok.AccessToken).Me(ctx)
	if err != nil || me.User != "ada@example.com" {
		t.Fatalf("device signed in as %+v, %v", me, err)
	}
	if got := w.groupsOf(t, "ada@example.com"); !slices.Equal(got, []string{"oncall", "staff"}) {
		t.Fatalf("groups after a device sign-in: %v, want [oncall staff]", got)
	}
}

// approveDevice is the user's browser: it reads the code the CLI printed,
// enters it, signs in through the provider and approves.
func (w *oidcWorld) approveDevice(ctx context.Context, cancel context.CancelFunc, out io.Reader) (err error) {
	defer func() {
		if err != nil {
			cancel()
		}
		go io.Copy(io.Discard, out)
	}()
	buf := make([]byte, 4096)
	var printed string
	var m []string
	for m == nil {
		n, rerr := out.Read(buf)
		if rerr != nil {
			return fmt.Errorf("the CLI printed no code: %q, %v", printed, rerr)
		}
		printed += string(buf[:n])
		m = deviceLine.FindStringSubmatch(printed)
	}
	jar, _ := cookiejar.New(nil)
	b := *w.client
	b.Jar = jar
	page, _, _, err := get(&b, m[1]+"?"+url.Values{"user_code": {m[2]}}.Encode())
	if err != nil {
		return err
	}
	approve, err := w.throughProvider(&b, m[1], page, url.Values{"user_code": {m[2]}}, "ada@example.com", "ada-pw")
	if err != nil {
		return err
	}
	if !strings.Contains(approve, "Signed in as ada@example.com") || !strings.Contains(approve, `value="approve"`) {
		return fmt.Errorf("after the provider, no approval page:\n%s", approve)
	}
	form := url.Values{"action": {"approve"}}
	for _, h := range hiddenInput.FindAllStringSubmatch(approve, -1) {
		form.Set(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
	}
	resp, err := b.PostForm(m[1], form)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("approve: %s: %s", resp.Status, body)
	}
	return nil
}

// The password form is on the login pages only while some user has a
// password: once the provider signs everyone in, its button is the one way.
func TestPasswordFormOnlyWithPasswordUsers(t *testing.T) {
	noPasswords := controltest.World()
	noPasswords.Users = nil
	for _, c := range []struct {
		name     string
		world    api.World
		password bool
	}{{"password users", controltest.World(), true}, {"no password users", noPasswords, false}} {
		t.Run(c.name, func(t *testing.T) {
			w := startOIDCWorld(t, idpSecret, c.world)
			q := url.Values{"client_id": {api.ClientCLI}, "redirect_uri": {"http://127.0.0.1:9/callback"}, "response_type": {"code"},
				"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}, "state": {"s"}}
			login, _, _, err := get(w.client, w.ctl.URL+api.PathAuthorize+"?"+q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			device, _, _, err := get(w.client, w.ctl.URL+api.PathDeviceVerify)
			if err != nil {
				t.Fatal(err)
			}
			for name, page := range map[string]string{"login": login, "device": device} {
				if !strings.Contains(page, `value="upstream"`) {
					t.Errorf("%s page offers no identity provider:\n%s", name, page)
				}
				if got := strings.Contains(page, `name="password"`); got != c.password {
					t.Errorf("%s page shows the password form: %v, want %v:\n%s", name, got, c.password, page)
				}
			}
			if !c.password && (strings.Contains(login, `value="login"`) || strings.Contains(device, `value="login"`)) {
				t.Errorf("a password button without a password form:\n%s\n%s", login, device)
			}
			// The provider's button signs in all the same.
			if _, err := w.signIn(t, "ada@example.com", "ada-pw"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Wired end to end: control checks its provider's users every
// --oidc-check-interval (shortened here), and a user removed there finds
// their session ended with the reason.
func TestUserRemovedAtProviderIsSignedOut(t *testing.T) {
	w := startOIDCWorldWith(t, idpSecret, controltest.World(), func(cfg *control.Config) { cfg.OIDCCheckEvery = 100 * time.Millisecond })
	ctx := context.Background()
	tok, err := w.signIn(t, "ada@example.com", "ada-pw")
	if err != nil {
		t.Fatal(err)
	}
	ada := w.ctl.API(tok)
	if _, err := ada.Me(ctx); err != nil {
		t.Fatal(err)
	}
	w.idp.RemoveUser("ada@example.com")
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := ada.Me(ctx)
		if api.IsCode(err, api.CodeUnauthorized) && strings.Contains(err.Error(), "identity provider no longer accepts this sign-in") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a user removed at the provider is still signed in: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling observable state: the next check round is due within 100ms
	}
}
