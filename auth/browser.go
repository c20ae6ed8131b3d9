package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// openError is a browser that could not be opened; it matches ErrNoBrowser.
type openError struct{ err error }

func (e *openError) Error() string        { return "open the browser: " + e.err.Error() }
func (e *openError) Unwrap() error        { return e.err }
func (e *openError) Is(target error) bool { return target == ErrNoBrowser }

// starter is an Opener that starts a process and reports how it ended, so
// that a browser command that fails stops the wait (SystemOpener is one).
type starter interface {
	start(url string) (exited <-chan error, err error)
}

// callbackPath is where the loopback listener takes the redirect.
const callbackPath = "/callback"

type callbackResult struct {
	tok *Token
	err error
}

// SignInBrowser runs the authorization-code grant with PKCE (RFC 7636)
// through a loopback listener on 127.0.0.1 (RFC 8252 §7.3): it opens the
// authorize URL with Opener (printing it too), waits for the browser to come
// back with a code, answers the browser with a small page and exchanges the
// code. It returns when the sign-in ends or ctx does; the listener is
// closed either way.
func (f *Flow) SignInBrowser(ctx context.Context) (*Token, error) {
	if f.Opener == nil {
		return nil, &openError{errors.New("none is configured")}
	}
	conf, err := f.config()
	if err != nil {
		return nil, err
	}
	// An IP literal, never "localhost": the name may resolve elsewhere,
	// and control accepts only loopback IP literals.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sign in: listen on 127.0.0.1 for the browser's answer: %w", err)
	}
	conf.RedirectURL = "http://" + ln.Addr().String() + callbackPath
	verifier, state := oauth2.GenerateVerifier(), randomState()
	authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))

	results := make(chan callbackResult, 1)
	cb := &callback{flow: f, conf: conf, ctx: f.clientCtx(ctx), host: ln.Addr().String(),
		state: state, verifier: verifier, results: results}
	srv := &http.Server{Handler: cb, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		// Let the browser get its page, then close the listener and any
		// connection left: nothing listens once the sign-in is over.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}()

	fmt.Fprintf(f.out(), "Opening your browser to sign in…\nIf it does not open, visit: %s\n", authURL)
	var exited <-chan error
	if s, ok := f.Opener.(starter); ok {
		exited, err = s.start(authURL)
	} else {
		err = f.Opener.Open(authURL)
	}
	if err != nil {
		return nil, &openError{err}
	}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sign-in in the browser stopped before it finished: %w", ctx.Err())
		case err := <-exited:
			exited = nil // a browser that exits 0 may have handed the URL on
			if err != nil {
				return nil, &openError{err}
			}
		case r := <-results:
			return r.tok, r.err
		}
	}
}

func randomState() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// callback is the loopback listener's handler: one sign-in's answer.
type callback struct {
	flow     *Flow
	conf     *oauth2.Config
	ctx      context.Context // the flow's, for the exchange
	host     string          // 127.0.0.1:port, the only Host accepted
	state    string
	verifier string
	results  chan<- callbackResult
	mu       sync.Mutex
	done     bool
}

func (c *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Anything but the redirect itself (a favicon, a page elsewhere that
	// found the port, a DNS-rebound name) is turned away.
	if r.URL.Path != callbackPath || r.Host != c.host || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		answer(w, http.StatusOK, "Sign-in already finished", "You can close this tab.")
		return
	}
	// A wrong state is not our browser's answer (RFC 6749 §10.12): say so
	// and keep waiting for the real one.
	if q.Get("state") != c.state {
		answer(w, http.StatusBadRequest, "Sign-in not recognised", "This answer does not belong to the sign-in your terminal is waiting for. Start the sign-in again there if it does not finish.")
		return
	}
	if iss := q.Get("iss"); iss != "" && iss != strings.TrimSuffix(c.flow.Issuer, "/") {
		c.finish(w, nil, fmt.Errorf("the answer came from %s, not from %s (RFC 9207)", iss, c.flow.Issuer))
		return
	}
	if e := q.Get("error"); e != "" {
		msg := e
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		c.finish(w, nil, fmt.Errorf("control refused the sign-in: %s", msg))
		return
	}
	code := q.Get("code")
	if code == "" {
		c.finish(w, nil, errors.New("the browser came back without a code"))
		return
	}
	t, err := c.conf.Exchange(c.ctx, code, oauth2.VerifierOption(c.verifier))
	if err != nil {
		c.finish(w, nil, fmt.Errorf("exchange the code at %s: %s", c.conf.Endpoint.TokenURL, describe(err)))
		return
	}
	tok, err := token(t)
	c.finish(w, tok, err)
}

// finish answers the browser and hands the result to SignInBrowser.
func (c *callback) finish(w http.ResponseWriter, tok *Token, err error) {
	c.done = true
	c.results <- callbackResult{tok, err}
	if err != nil {
		answer(w, http.StatusBadRequest, "Sign-in failed", "RunOS could not sign you in: "+err.Error()+". Go back to your terminal and try again.")
		return
	}
	answer(w, http.StatusOK, "Signed in", "Signed in, you can close this tab.")
}

var answerTmpl = template.Must(template.New("answer").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · RunOS</title></head>
<body><main><h1>{{.Title}}</h1><p{{if .Failed}} role="alert"{{end}}>{{.Text}}</p></main></body></html>
`))

func answer(w http.ResponseWriter, status int, title, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = answerTmpl.Execute(w, struct {
		Title, Text string
		Failed      bool
	}{title, text, status >= 400})
}
