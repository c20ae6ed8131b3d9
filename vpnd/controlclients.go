package vpnd

import (
	"sync"

	"github.com/runos/vpn/api"
)

// controlClients hands out clients of control that share one HTTP
// transport per control URL: the session's sync, a sign-in's checks, the
// leaves and sign-outs sent from the pending queue and the relay's tickets
// all ride the same kept-alive connections.
//
// A client per request, as each of those once made, kept its own
// connection alive with nothing to close it: every disconnect left a TLS
// connection, an HTTP/2 read loop and ~60 KB of buffers behind, so a
// daemon connected and disconnected 200 times held 200 idle connections
// to control and 18 MB more memory (docs/performance.md "The daemon's
// memory"), and a long-lived laptop would in time run out of descriptors.
// Sharing also spares each disconnect a TLS handshake.
type controlClients struct {
	dial func(apiURL string) (*api.Client, error) // api.NewClient with the daemon's CA and options

	mu   sync.Mutex
	url  string
	base *api.Client // nil until the first client
}

// client returns a client of the control at apiURL that sends token. A
// client of another URL than the last one's replaces it, and the last
// one's idle connections are closed (a daemon follows one control).
func (c *controlClients) client(apiURL, token string) (*api.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base == nil || c.url != apiURL {
		b, err := c.dial(apiURL)
		if err != nil {
			return nil, err
		}
		if c.base != nil {
			closeIdle(c.base)
		}
		c.base, c.url = b, apiURL
	}
	return c.base.WithToken(token), nil
}

// closeIdle closes the idle connections of both of cl's transports.
func closeIdle(cl *api.Client) {
	cl.HTTP.CloseIdleConnections()
	if cl.StreamHTTP != nil {
		cl.StreamHTTP.CloseIdleConnections()
	}
}
