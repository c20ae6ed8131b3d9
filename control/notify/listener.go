package notify

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/internal/backoff"
)

// Listener feeds one replica's hub with the changes every replica commits.
type Listener struct {
	connect func(context.Context) (*pgx.Conn, error)
	st      store.Store
	hub     *hub.Hub
	origin  string
	log     *slog.Logger

	connected atomic.Bool
	mu        sync.Mutex
	heard     uint64 // every change up to this version has been published to the hub
}

// Config configures a Listener.
type Config struct {
	// Connect opens the dedicated connection (sqlstore.Postgres.Conn).
	Connect func(context.Context) (*pgx.Conn, error)
	Store   store.Store // read to catch up after a reconnect
	Hub     *hub.Hub
	// Origin is this replica's store instance (sqlstore.Postgres.Origin): its
	// own changes are published to the hub by the server after each commit.
	Origin string
	Logger *slog.Logger
}

// New returns a listener that starts from what the hub holds now: call it
// before this replica commits anything.
func New(c Config) *Listener {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{connect: c.Connect, st: c.Store, hub: c.Hub, origin: c.Origin, log: c.Logger, heard: c.Hub.Global()}
}

// Connected reports whether the listener is listening now (for /readyz).
func (l *Listener) Connected() bool { return l.connected.Load() }

// check is how long the listener waits for a notification before it makes
// sure its connection still answers: a connection that died without a
// word (a host gone, a cable cut) is found within about this.
const check = 10 * time.Second

// Run listens until ctx ends, reconnecting after every loss
// (internal/backoff, 100 ms doubling to 1 s: while it is away every stream
// and long-poll on this replica lags the database, and one connection
// attempt a second is nothing to a database coming back); each
// (re)connection first catches up. Ready, when set, is called once after
// the first catch-up.
func (l *Listener) Run(ctx context.Context, ready func()) {
	retry := backoff.New(100*time.Millisecond, time.Second)
	down := false // an outage was logged
	for ctx.Err() == nil {
		err := l.session(ctx, func() {
			retry.Reset()
			if down {
				l.log.Info("notify: listening again; caught up", "version", l.heardVersion())
				down = false
			} else {
				l.log.Info("notify: listening for other replicas' changes", "channel", Channel, "version", l.heardVersion())
			}
			if ready != nil {
				ready()
				ready = nil
			}
		})
		l.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		if !down {
			l.log.Warn("notify: not listening; changes of other replicas reach this one's long-polls once it listens again", "err", err)
			down = true
		}
		if retry.Wait(ctx) != nil {
			return
		}
	}
}

// session is one connection: LISTEN, catch up, then publish each
// notification until the connection fails.
func (l *Listener) session(ctx context.Context, up func()) error {
	c, err := l.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	// Listening before reading: a change committed after the read is
	// heard, one before it is read. Either may come twice, which only
	// wakes a long-poll to compare versions again.
	if err := l.catchUp(ctx, l.heardVersion()); err != nil {
		return err
	}
	l.connected.Store(true)
	up()
	for {
		wctx, cancel := context.WithTimeout(ctx, check)
		n, err := c.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if wctx.Err() != nil && !c.IsClosed() {
				pctx, pcancel := context.WithTimeout(ctx, check)
				err = c.Ping(pctx)
				pcancel()
				if err == nil {
					continue
				}
			}
			return err
		}
		if err := l.handle(ctx, n.Payload); err != nil {
			return err
		}
	}
}

func (l *Listener) heardVersion() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heard
}

func (l *Listener) setHeard(v uint64) {
	l.mu.Lock()
	l.heard = max(l.heard, v)
	l.mu.Unlock()
}

func (l *Listener) handle(ctx context.Context, payload string) error {
	c, err := Parse(payload)
	if err != nil {
		l.log.Warn("notify: unreadable notification", "err", err)
		return nil
	}
	switch {
	case c.Origin == l.origin:
		// Published by this replica after its commit.
	case c.Reread:
		if err := l.catchUp(ctx, c.Version-1); err != nil {
			return err
		}
	default:
		l.hub.Publish(c.Version, c.Topics)
	}
	l.setHeard(c.Version)
	return nil
}

// catchUp publishes every topic changed after version since, oldest change
// first.
func (l *Listener) catchUp(ctx context.Context, since uint64) error {
	var global uint64
	var changed map[string]uint64
	err := l.st.View(ctx, func(r store.Reader) error {
		var err error
		if global, err = r.GlobalVersion(); err != nil {
			return err
		}
		changed, err = r.TopicsSince(since)
		return err
	})
	if err != nil {
		return err
	}
	byVersion := map[uint64][]string{}
	for t, v := range changed {
		byVersion[v] = append(byVersion[v], t)
	}
	for _, v := range slices.Sorted(maps.Keys(byVersion)) {
		l.hub.Publish(v, byVersion[v])
	}
	if len(changed) > 0 {
		l.log.Debug("notify: caught up", "since", since, "topics", len(changed), "version", global)
	}
	l.setHeard(global)
	return nil
}
