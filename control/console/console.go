// Package console is control's VPN web page, /console: an operator sees,
// for each cluster of the account, the VPN service (node, endpoint and
// whether private or public, port), the devices joined with their user,
// address and last handshake and a Revoke button, the latest move with its
// progress while it runs, the latest audit entries, the account's users
// and its access policy, shown and edited whole; a user who is no operator
// sees their own devices, each with Remove, and of those sections the ones
// an `operate … -> *:` rule of the policy grants them (read-audit,
// manage-users, set-policy), as control decides it (/v1/me's May).
//
// It is a client of control's own /v1 API, called in-process with the
// signed-in user's token (so every rule and every scope is the API's), and
// of control's authorization server (the authorization-code grant with
// PKCE, as the apps sign in, redirecting to /console/callback). The
// session is a cookie holding that token; actions are POSTed forms with a
// CSRF token bound to it. The page is server-rendered (html/template, its
// own CSS and a small script, embedded); live parts follow control's push
// (server-sent events woken by the change hub), never a polling timer,
// and the page works without the script.
//
// It is not an admin console for anything else (clusters, nodes, tokens:
// the CLI), and it keeps no state of its own: any replica serves any
// request.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/oauth"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures the console.
type Config struct {
	Issuer string       // control's public URL, e.g. https://198.51.100.10
	API    http.Handler // the /v1 API, called in-process
	OAuth  http.Handler // the authorization server (its token endpoint), in-process
	Hub    *hub.Hub     // what the live parts wait on
	Logger *slog.Logger
	Now    func() time.Time
	// KeepAlive is how often an idle event stream sends a comment, so that
	// proxies keep it open; 0: 25 s.
	KeepAlive time.Duration
}

// Console serves /console.
type Console struct {
	cfg    Config
	issuer *url.URL
	log    *slog.Logger
	tmpl   *template.Template
	mux    *http.ServeMux
	oauth  oauth2.Config
	api    *http.Client // in-process to Config.API
	token  *http.Client // in-process to Config.OAuth
}

// New checks cfg and returns the console.
func New(cfg Config) (*Console, error) {
	// The one check of a control URL; plain http:// only reaches here
	// when control itself was started with --insecure-http (its Check).
	base, err := api.ParseControlURL(cfg.Issuer, true)
	if err != nil {
		return nil, fmt.Errorf("console: issuer: %w", err)
	}
	iss, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("console: issuer %q: %w", cfg.Issuer, err)
	}
	if cfg.API == nil || cfg.OAuth == nil || cfg.Hub == nil {
		return nil, errors.New("console: Config needs the API, the OAuth server and the hub")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 25 * time.Second
	}
	tmpl, err := template.New("console").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	c := &Console{
		cfg: cfg, issuer: iss, log: cfg.Logger, tmpl: tmpl,
		api:   &http.Client{Transport: inProcess{cfg.API}},
		token: &http.Client{Transport: inProcess{cfg.OAuth}},
		oauth: oauth2.Config{
			ClientID: api.ClientConsole,
			Endpoint: oauth2.Endpoint{AuthURL: iss.String() + api.PathAuthorize, TokenURL: iss.String() + api.PathToken,
				AuthStyle: oauth2.AuthStyleInParams},
			RedirectURL: iss.String() + oauth.ConsoleCallback,
		},
	}
	static, _ := fs.Sub(staticFS, "static")
	m := http.NewServeMux()
	m.HandleFunc("GET /console", c.page)
	m.HandleFunc("GET /console/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console", http.StatusMovedPermanently)
	})
	m.HandleFunc("GET /console/login", c.login)
	m.HandleFunc("GET "+oauth.ConsoleCallback, c.callback)
	m.HandleFunc("POST /console/logout", c.logout)
	m.HandleFunc("POST /console/devices/{id}/revoke", c.revoke)
	m.HandleFunc("POST /console/devices/{id}/remove", c.remove)
	m.HandleFunc("POST /console/accounts/{aid}/policy", c.setPolicy)
	m.HandleFunc("POST /console/accounts/{aid}/users/{email}/remove", c.removeUser)
	m.HandleFunc("GET /console/events", c.events)
	m.Handle("GET /console/static/", http.StripPrefix("/console/static/", staticHandler(static)))
	m.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.message(w, http.StatusNotFound, "Not found", "There is no such page in the console.", true)
	})
	c.mux = m
	return c, nil
}

// Handler serves /console and everything under it.
func (c *Console) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		c.mux.ServeHTTP(w, r)
	})
}

// csp is the pages' Content-Security-Policy: the console's own script,
// stylesheet, event stream and forms, nothing else.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func staticHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache") // revalidated: a new control brings new files
		files.ServeHTTP(w, r)
	})
}
