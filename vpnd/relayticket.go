package vpnd

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/runos/vpn/api"
)

// relayCreds are what a relay ticket is asked for with: the session as the
// daemon holds it now (zero: signed out). The token goes to control, never
// to a relay: a relay is shown the ticket control gives for its node.
type relayCreds struct{ apiURL, token, deviceID string }

// relayTickets asks control for relay tickets on the engine's behalf (the
// engine is made before the daemon, which keeps the session current here).
type relayTickets struct {
	connect func(apiURL, token string) (*api.Client, error)

	mu     sync.Mutex
	cur    relayCreds
	client *api.Client // for cur, made at its first ticket
}

// set makes c the session tickets are asked with.
func (r *relayTickets) set(c relayCreds) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != c {
		r.cur, r.client = c, nil
	}
}

// networkChanged forgets the client: its kept-alive connection to control
// was made over the network that is gone (its packets now go nowhere, and
// a ticket asked over it waits for its deadline while the relay waits for
// the ticket). The next ticket dials control afresh.
func (r *relayTickets) networkChanged() {
	r.mu.Lock()
	cl := r.client
	r.client = nil
	r.mu.Unlock()
	if cl != nil {
		cl.HTTP.CloseIdleConnections()
	}
}

// ticket asks control for the relay ticket of cid's VPN node, and says
// when it expires (the relay's Bind shows it again until then).
func (r *relayTickets) ticket(ctx context.Context, cid string) (string, time.Time, error) {
	cl, deviceID, err := r.clientFor()
	if err != nil {
		return "", time.Time{}, err
	}
	t, err := cl.RelayTicket(ctx, deviceID, cid)
	if err != nil {
		return "", time.Time{}, err
	}
	return t.Ticket, t.ExpiresAt, nil
}

func (r *relayTickets) clientFor() (*api.Client, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cur
	if c.token == "" || c.deviceID == "" {
		return nil, "", errors.New("not signed in: no relay ticket to ask control for")
	}
	if r.client == nil {
		cl, err := r.connect(c.apiURL, c.token)
		if err != nil {
			return nil, "", err
		}
		r.client = cl
	}
	return r.client, c.deviceID, nil
}
