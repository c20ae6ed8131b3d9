package vpnd

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/runos/vpn/api"
)

// relayCreds are what a relay ticket is asked for with: the session as the
// daemon holds it now (zero: signed out). The token goes to control, never
// to a relay: a relay is shown the ticket control gives for its node.
type relayCreds struct{ apiURL, token, deviceID string }

// relayTickets asks control for relay tickets on the engine's behalf (the
// engine is made before the daemon, which keeps the session current here).
type relayTickets struct {
	cur     atomic.Pointer[relayCreds]
	connect func(apiURL, token string) (*api.Client, error)
}

// set makes c the session tickets are asked with.
func (r *relayTickets) set(c relayCreds) {
	if cur := r.cur.Load(); cur == nil || *cur != c {
		r.cur.Store(&c)
	}
}

// ticket asks control for the relay ticket of cid's VPN node.
func (r *relayTickets) ticket(ctx context.Context, cid string) (string, error) {
	c := r.cur.Load()
	if c == nil || c.token == "" || c.deviceID == "" {
		return "", errors.New("not signed in: no relay ticket to ask control for")
	}
	cl, err := r.connect(c.apiURL, c.token)
	if err != nil {
		return "", err
	}
	t, err := cl.RelayTicket(ctx, c.deviceID, cid)
	if err != nil {
		return "", err
	}
	return t.Ticket, nil
}
