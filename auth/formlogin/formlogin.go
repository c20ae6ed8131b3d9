// Package formlogin is a scripted browser for control's login page: it
// GETs the authorize (or device) URL, finds the form with username and
// password fields, fills them, submits it like a browser pressing the
// form's first button, and follows redirects until they reach the loopback
// redirect URI, which it visits like a browser would. On a device page it
// then presses Approve. There is no shortcut around the form: what it posts
// is what the page offered, so it tests the page as much as it uses it.
package formlogin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
)

// Result is the last page the scripted browser reached.
type Result struct {
	URL    string // the final URL (the loopback redirect, or the device page)
	Status int
	Body   string // the page's text, one line per block
}

// maxPage bounds what is read of any page.
const maxPage = 1 << 20

// maxSteps bounds the forms submitted in one sign-in (login, then approve).
const maxSteps = 3

// Options change how Login signs in.
type Options struct {
	// Provider, when set, is the origin (https://host[:port]) of the
	// identity provider control's page offers ("Sign in with …"): the
	// scripted browser presses that button instead of filling control's
	// form, follows the redirect to the provider, and fills the provider's
	// login form (the one with username and password fields) instead.
	Provider string
}

// Login signs in through the login form at rawURL with client (which must
// trust control's CA; its cookie jar and redirect policy are not used: the
// scripted browser keeps its own, like a fresh browser profile). A device
// verification page is approved as well. Where the page also offers an
// identity provider, the password form's own button is pressed.
func Login(ctx context.Context, client *http.Client, rawURL, username, password string) (*Result, error) {
	return LoginWith(ctx, client, rawURL, username, password, Options{})
}

// LoginWith is Login with options: through an identity provider.
func LoginWith(ctx context.Context, client *http.Client, rawURL, username, password string, o Options) (*Result, error) {
	start, err := url.Parse(rawURL)
	if err != nil || (start.Scheme != "https" && start.Scheme != "http") || start.Host == "" {
		return nil, fmt.Errorf("sign-in URL %q: want an http(s) URL", rawURL)
	}
	var provider *url.URL
	if o.Provider != "" {
		if provider, err = url.Parse(o.Provider); err != nil || provider.Host == "" {
			return nil, fmt.Errorf("identity provider %q: want its origin, https://host", o.Provider)
		}
	}
	b, err := newBrowser(client, start, provider)
	if err != nil {
		return nil, err
	}
	res, err := b.get(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	loggedIn := false
	for step := 0; ; step++ {
		if res.status != http.StatusOK && !res.isForm() {
			return res.result(), fmt.Errorf("%s answered %d: %s", res.url, res.status, res.summary())
		}
		var f *form
		switch {
		case provider != nil && res.url.Host == start.Host && res.loginForm() != nil:
			// Control's page: its "Sign in with …" button, not its form.
			if f = res.buttonForm("upstream"); f == nil {
				return res.result(), fmt.Errorf("%s offers no identity provider to sign in with: %s", res.url, res.summary())
			}
			f.press("upstream")
		case res.loginForm() != nil:
			if loggedIn {
				// The login form again after submitting it: it says why.
				return res.result(), fmt.Errorf("the login page refused the sign-in: %s", res.summary())
			}
			f = res.loginForm()
			f.set("username", username)
			f.set("password", password)
			f.press("login") // the password's button, where a provider's is first
			loggedIn = true
		case res.buttonForm("approve") != nil:
			f = res.buttonForm("approve")
			f.press("approve")
		default:
			if !loggedIn {
				return res.result(), fmt.Errorf("%s has no form with username and password fields: %s", res.url, res.summary())
			}
			return res.result(), nil
		}
		if step == maxSteps {
			return res.result(), errors.New("the sign-in pages kept asking for more forms")
		}
		if res, err = b.submit(ctx, res, f); err != nil {
			return nil, err
		}
	}
}

type browser struct {
	hc    *http.Client
	start *url.URL
}

func newBrowser(client *http.Client, start, provider *url.URL) (*browser, error) {
	if client == nil {
		client = http.DefaultClient
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	hc := *client
	hc.Jar = jar
	// Follow redirects on the sign-in's own host, the identity provider's
	// when signing in through one, and to the loopback redirect URI only:
	// a scripted browser has no business elsewhere.
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if provider != nil && req.URL.Host == provider.Host {
			return nil
		}
		if req.URL.Host != start.Host && !isLoopback(req.URL) {
			return fmt.Errorf("refusing to follow a redirect to %s (neither %s nor a loopback address)", req.URL.Redacted(), start.Host)
		}
		return nil
	}
	return &browser{hc: &hc, start: start}, nil
}

func isLoopback(u *url.URL) bool {
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// response is a fetched and parsed page.
type response struct {
	url    *url.URL
	status int
	doc    *document
}

func (r *response) result() *Result {
	return &Result{URL: r.url.String(), Status: r.status, Body: r.doc.text}
}

// summary is the page's error message if it shows one, else its text.
func (r *response) summary() string {
	s := r.doc.alert
	if s == "" {
		s = strings.ReplaceAll(strings.TrimSpace(r.doc.text), "\n", " — ")
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "an empty page"
	}
	return s
}

func (r *response) isForm() bool { return r.loginForm() != nil }

func (r *response) loginForm() *form {
	for _, f := range r.doc.forms {
		if f.has("username") && f.has("password") {
			return f.clone()
		}
	}
	return nil
}

func (r *response) buttonForm(value string) *form {
	for _, f := range r.doc.forms {
		for _, b := range f.buttons {
			if b.value == value {
				return f.clone()
			}
		}
	}
	return nil
}

func (b *browser) get(ctx context.Context, u string) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return b.do(req)
}

// submit posts (or gets) f as a browser does, Origin included.
func (b *browser) submit(ctx context.Context, from *response, f *form) (*response, error) {
	action := from.url
	if f.action != "" {
		a, err := from.url.Parse(f.action)
		if err != nil {
			return nil, fmt.Errorf("form action %q: %w", f.action, err)
		}
		action = a
	}
	if action.Scheme != from.url.Scheme || action.Host != from.url.Host {
		return nil, fmt.Errorf("the form posts to %s, not to the page's own site %s", action.Redacted(), from.url.Host)
	}
	body := f.values().Encode()
	var req *http.Request
	var err error
	if strings.EqualFold(f.method, http.MethodGet) {
		u := *action
		u.RawQuery = body
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, action.String(), strings.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", from.url.Scheme+"://"+from.url.Host)
		}
	}
	if err != nil {
		return nil, err
	}
	return b.do(req)
}

func (b *browser) do(req *http.Request) (*response, error) {
	req.Header.Set("Accept", "text/html")
	resp, err := b.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("browse %s: %w", req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxPage))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", resp.Request.URL.Redacted(), err)
	}
	doc, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", resp.Request.URL.Redacted(), err)
	}
	return &response{url: resp.Request.URL, status: resp.StatusCode, doc: doc}, nil
}
