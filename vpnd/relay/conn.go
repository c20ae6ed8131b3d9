package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"

	"github.com/coder/websocket"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/relaywire"
)

// dialWebSocket opens a relay stream: a WebSocket over HTTPS (HTTP/1.1,
// the certificate checked against cfg.TLS), showing the relay ticket and
// the device's public key, to the VPN node's own address only. A relay URL
// on any other address (an IP literal, or a name that resolves elsewhere)
// is refused before anything is sent: the ticket and the cluster's
// traffic go to the cluster's node or nowhere.
func (b *Bind) dialWebSocket(ctx context.Context, to Dest, ticket string) (Stream, error) {
	url := to.RelayURL
	if ticket == "" {
		return nil, fmt.Errorf("relay %s: no relay ticket to present", url)
	}
	if b.cfg.TLS == nil {
		return nil, fmt.Errorf("relay %s: no TLS configuration", url)
	}
	hostport, err := onNode(ctx, to)
	if err != nil {
		return nil, err
	}
	tc, err := b.cfg.TLS()
	if err != nil {
		return nil, fmt.Errorf("relay %s: %w", url, err)
	}
	node := to.Endpoint.Addr()
	// The name was checked to resolve to the node: dial the node, whatever
	// DNS says by now (the certificate is still checked for the name).
	toNode := func(addr string) string {
		if addr != hostport {
			return addr
		}
		_, port, _ := net.SplitHostPort(addr)
		return net.JoinHostPort(node.String(), port)
	}
	cd := &corkingDialer{tls: tc, addr: toNode} // cork.go: one TLS write per batch
	tr := &http.Transport{TLSClientConfig: tc.Clone(), Proxy: http.ProxyFromEnvironment, DialTLSContext: cd.dial,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, toNode(addr))
		}}
	hdr := http.Header{}
	hdr.Set(relaywire.HeaderTicket, ticket)
	hdr.Set(relaywire.HeaderDeviceKey, b.cfg.Key.String())
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		// No redirect is followed: the ticket and the device key go to the
		// node's relay or nowhere (a redirect's request carries them on).
		HTTPClient: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		HTTPHeader:   hdr,
		Subprotocols: []string{relaywire.Subprotocol},
	})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, refusal(resp, err)
	}
	if c.Subprotocol() != relaywire.Subprotocol {
		c.Close(websocket.StatusPolicyViolation, "want "+relaywire.Subprotocol)
		return nil, fmt.Errorf("relay %s answered without the %s subprotocol: not a RunOS relay", url, relaywire.Subprotocol)
	}
	// The stream lives until closed; its context is the Bind's.
	nc := websocket.NetConn(b.ctx, c, websocket.MessageBinary)
	if cc := cd.dialed(); cc != nil {
		return corkedStream{Stream: nc, c: cc}, nil
	}
	return nc, nil
}

// onNode checks that to's relay URL is on the VPN node (the endpoint's
// address): its host is that address, or a name that resolves to it. It
// returns the URL's host:port as the transport will dial it.
func onNode(ctx context.Context, to Dest) (hostport string, err error) {
	u, err := api.ParseRelayURL(to.RelayURL)
	if err != nil {
		return "", err
	}
	node := to.Endpoint.Addr().Unmap()
	name, err := api.RelayHostIs(u, node)
	if err != nil {
		return "", fmt.Errorf("%w: refused", err)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	hostport = net.JoinHostPort(u.Hostname(), port)
	if name == "" {
		return hostport, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return "", fmt.Errorf("relay %s: %s does not resolve: %w", u.Redacted(), name, err)
	}
	if !slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Unmap() == node }) {
		return "", fmt.Errorf("relay %s: %s resolves to %v, not the VPN node's address %s: refused", u.Redacted(), name, addrs, node)
	}
	return hostport, nil
}

// refusal words a failed upgrade: the relay's (or control's) own error
// when it sent one.
func refusal(resp *http.Response, err error) error {
	if resp == nil || resp.Body == nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	var eb api.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
		eb.Error.Status = resp.StatusCode
		return fmt.Errorf("the relay refused: %w", eb.Error)
	}
	return fmt.Errorf("the relay answered %s: %w", resp.Status, err)
}
