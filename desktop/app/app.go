// Package app runs RunOS Desktop: it follows the daemon through the local
// API's stream (never polling), feeds what happens to the pure menu model
// (desktop/menu), hands each new menu to a Renderer (desktop/tray, or a
// test), and runs the operations the model asks for: up and down as the
// CLI does them, connect and disconnect a cluster, the browser sign-in,
// opening the console. One goroutine owns the state; everything else posts
// events to it.
package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/desktop/menu"
	"github.com/runos/vpn/internal/backoff"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/localapi/vpnup"
)

// Daemon is the part of localapi.Client the app uses.
type Daemon interface {
	Status(ctx context.Context) (*localapi.Status, error)
	Watch(ctx context.Context, fn func(*localapi.Status) bool) error
	SetSession(ctx context.Context, r localapi.SessionRequest) (*localapi.Status, error)
	EndSession(ctx context.Context) (*localapi.Status, error)
	Connect(ctx context.Context, cid string) (*localapi.Status, error)
	Disconnect(ctx context.Context, cid string) (*localapi.Status, error)
}

// Token is a finished sign-in.
type Token struct {
	AccessToken string
	ExpiresAt   time.Time
}

// SignIn signs the user in to control at apiURL in their browser (as the
// user, never as root) and returns the session to hand to the daemon.
type SignIn func(ctx context.Context, apiURL string) (*Token, error)

// Control is control's client with a fresh sign-in's token, for up to list
// the account's clusters (*api.Client is one).
type Control func(apiURL, token string) (vpnup.Lister, error)

// Renderer shows a menu. Render is called from the app's goroutine only,
// and only when the menu changed.
type Renderer interface{ Render(menu.Menu) }

// Config is what the app needs; the zero values of the optional fields
// are sensible.
type Config struct {
	Daemon Daemon
	SignIn SignIn
	// Control lists the account's clusters after a sign-in; default: an
	// api.Client trusting the system's CAs.
	Control Control
	Open    func(url string) error // opens the console in the browser
	Render  Renderer
	Log     *slog.Logger

	AtLogin    bool   // launched by the login item: reconnect silently, open nothing
	APIURL     string // control's URL from the user's config (else the daemon's)
	DefaultCID string // the configured cid for up
	ConsoleURL string
	OSUser     string
	ConfigErr  error // the user's config could not be read (shown in the menu)

	Now func() time.Time // default time.Now

	// Backoff between attempts to reach the daemon: doubling from
	// BackoffMin to BackoffMax with jitter (defaults 100ms and 10s, as
	// every client of the project backs off).
	BackoffMin, BackoffMax time.Duration

	OpTimeout     time.Duration // one call to the daemon (default 30s)
	SignInTimeout time.Duration // waiting for the browser (default 10m)
}

// App is a running RunOS Desktop.
type App struct {
	cfg    Config
	events chan menu.Event
	retry  chan struct{}
	quit   chan struct{} // closed when the user quits
	done   chan struct{} // closed when Run returns

	mu       sync.Mutex
	current  menu.Menu
	cancelIn context.CancelFunc // cancels the browser sign-in in flight
}

// New returns an app; Run starts it.
func New(cfg Config) *App {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Control == nil {
		cfg.Control = func(apiURL, token string) (vpnup.Lister, error) {
			c, err := api.NewClient(apiURL, token, "")
			if err != nil {
				return nil, err
			}
			return c, nil
		}
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 100 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 10 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 30 * time.Second
	}
	if cfg.SignInTimeout <= 0 {
		cfg.SignInTimeout = 10 * time.Minute
	}
	return &App{
		cfg:    cfg,
		events: make(chan menu.Event, 64),
		retry:  make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// Click is the user choosing an item; safe from any goroutine.
func (a *App) Click(op menu.Op) { a.post(menu.ClickEvent{Op: op}) }

// Menu is the menu last rendered.
func (a *App) Menu() menu.Menu {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.current
}

// Quit is closed when the user chose Quit.
func (a *App) Quit() <-chan struct{} { return a.quit }

func (a *App) post(ev menu.Event) {
	select {
	case a.events <- ev:
	case <-a.done: // the loop has stopped: nobody is left to tell
	}
}

// Run follows the daemon and serves the menu until ctx ends or the user
// quits. Operations still in flight are cancelled.
func (a *App) Run(ctx context.Context) error {
	// On the way out: cancel what runs, stop taking events, wait for the
	// goroutines.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(a.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := menu.State{
		AtLogin:    a.cfg.AtLogin,
		OSUser:     a.cfg.OSUser,
		ConsoleURL: a.cfg.ConsoleURL,
		APIURL:     a.cfg.APIURL,
	}
	if a.cfg.ConfigErr != nil {
		s.ConfigErr = a.cfg.ConfigErr.Error()
	}
	if a.cfg.AtLogin {
		a.cfg.Log.Info("started at login: reconnecting silently if the session is valid; never opening a browser")
	}
	wg.Add(1)
	go func() { defer wg.Done(); a.follow(ctx) }()
	a.render(s)
	for {
		var ev menu.Event
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev = <-a.events:
		}
		var ops []menu.Op
		s, ops = menu.Apply(s, ev)
		for _, op := range ops {
			if op.Kind == menu.OpQuit {
				close(a.quit)
				return nil
			}
			a.start(ctx, &wg, op, s)
		}
		a.render(s)
	}
}

func (a *App) render(s menu.State) {
	m := menu.Build(s, a.cfg.Now())
	a.mu.Lock()
	same := m.Equal(a.current) && a.current.Status.Title != ""
	a.current = m
	a.mu.Unlock()
	if !same {
		a.cfg.Render.Render(m)
	}
}

// follow streams the daemon's status into the loop, reconnecting with
// backoff when the daemon is not running or restarts.
func (a *App) follow(ctx context.Context) {
	b := backoff.New(a.cfg.BackoffMin, a.cfg.BackoffMax)
	var lastErr string
	for {
		got := false
		err := a.cfg.Daemon.Watch(ctx, func(st *localapi.Status) bool {
			if !got {
				got = true
				a.cfg.Log.Info("following the daemon", "seq", st.Seq, "session", st.Session.State)
			}
			a.post(menu.StatusEvent{Status: st})
			return true
		})
		if ctx.Err() != nil {
			return
		}
		if got {
			b.Reset()
			lastErr = ""
		}
		if err == nil {
			err = errors.New("the daemon ended the stream")
		}
		if err.Error() != lastErr {
			a.cfg.Log.Warn("lost the daemon; retrying with backoff", "err", err)
			lastErr = err.Error()
		}
		a.post(menu.LostEvent{Err: err})
		// Jitter over the upper half of each step, so many desktops
		// reconnecting to one restarted daemon do not arrive together.
		select {
		case <-ctx.Done():
			return
		case <-a.retry:
			b.Reset()
		case <-time.After(b.Next()):
		}
	}
}

// start runs one operation; those that call the daemon report back with a
// DoneEvent.
func (a *App) start(ctx context.Context, wg *sync.WaitGroup, op menu.Op, s menu.State) {
	a.cfg.Log.Info("op", "op", op.String())
	switch op.Kind {
	case menu.OpRetry:
		select {
		case a.retry <- struct{}{}:
		default:
		}
		return
	case menu.OpCancelSignIn:
		a.mu.Lock()
		if a.cancelIn != nil {
			a.cancelIn()
		}
		a.mu.Unlock()
		return
	case menu.OpOpenConsole:
		u := menu.ConsoleURL(s)
		go func() {
			if err := a.cfg.Open(u); err != nil {
				a.cfg.Log.Warn("open the console", "url", u, "err", err)
			}
		}()
		return
	}
	st := s.Status
	wg.Add(1)
	go func() {
		defer wg.Done()
		st, err := a.do(ctx, op, st)
		if err != nil {
			a.cfg.Log.Warn("op failed", "op", op.String(), "err", err)
		}
		a.post(menu.DoneEvent{Op: op, Err: err, Status: st})
	}()
}
