package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/coder/websocket"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/relaywire"
)

// dialWebSocket opens a relay stream: a WebSocket over HTTPS (HTTP/1.1,
// the certificate checked against cfg.TLS), authenticated with the
// session's token and the device's public key.
func (b *Bind) dialWebSocket(ctx context.Context, url, token string) (Stream, error) {
	if token == "" {
		return nil, fmt.Errorf("relay %s: no session to present", url)
	}
	if b.cfg.TLS == nil {
		return nil, fmt.Errorf("relay %s: no TLS configuration", url)
	}
	tc, err := b.cfg.TLS()
	if err != nil {
		return nil, fmt.Errorf("relay %s: %w", url, err)
	}
	cd := &corkingDialer{tls: tc} // cork.go: one TLS write per batch
	tr := &http.Transport{TLSClientConfig: tc.Clone(), Proxy: http.ProxyFromEnvironment, DialTLSContext: cd.dial}
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+token)
	hdr.Set(relaywire.HeaderDeviceKey, b.cfg.Key.String())
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:   &http.Client{Transport: tr},
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
