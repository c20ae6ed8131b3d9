package vpnd

import (
	"sync"

	"github.com/runos/vpn/vpnd/localapi"
)

// watcher is one /v1/watch stream. It keeps only the latest status: a slow
// reader skips intermediate ones and never holds the daemon up.
type watcher struct {
	mu     sync.Mutex
	latest *localapi.Status
	ready  chan struct{} // cap 1: "latest changed"
}

func newWatcher() *watcher { return &watcher{ready: make(chan struct{}, 1)} }

func (w *watcher) offer(st localapi.Status) {
	w.mu.Lock()
	w.latest = &st
	w.mu.Unlock()
	kick(w.ready)
}

// take returns the latest status not yet taken, or nil.
func (w *watcher) take() *localapi.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.latest
	w.latest = nil
	return st
}

// watch registers a watcher that starts with the current status.
func (d *daemon) watch() (*watcher, func()) {
	w := newWatcher()
	d.mu.Lock()
	if d.watchers == nil {
		d.watchers = map[*watcher]struct{}{}
	}
	d.watchers[w] = struct{}{}
	w.offer(d.status)
	d.mu.Unlock()
	return w, func() {
		d.mu.Lock()
		delete(d.watchers, w)
		d.mu.Unlock()
	}
}
