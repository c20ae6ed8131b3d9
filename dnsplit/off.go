package dnsplit

import (
	"context"
	"sync"
)

// off is ModeOff: it changes nothing and says why.
type off struct {
	reason string
	mu     sync.Mutex
	err    string
}

func newOff(reason string) *off { return &off{reason: reason} }

func (o *off) Set(_ context.Context, routes []Route) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.err = ""
	if len(routes) > 0 {
		// Said once per Set so status explains why cluster names do not
		// resolve privately; the tunnel itself still works by address.
		o.err = "split DNS is off: cluster names resolve as they did before the VPN"
	}
	return nil
}

func (o *off) Status() Status {
	o.mu.Lock()
	defer o.mu.Unlock()
	return Status{Mode: ModeOff, Reason: o.reason, Error: o.err}
}

func (o *off) Close() error { return nil }
