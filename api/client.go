package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// Routes, relative to the API URL. {x} are path parameters.
//
//	GET    /v1/me
//	DELETE /v1/sessions/current                       end the caller's session
//	GET    /v1/clusters
//	GET    /v1/clusters/{cid}
//	GET    /v1/clusters/{cid}/nodes
//	GET    /v1/clusters/{cid}/nodes/{nid}
//	PUT    /v1/clusters/{cid}/nodes/{nid}/ingress
//	DELETE /v1/clusters/{cid}/nodes/{nid}[?resetCluster=true]
//	GET    /v1/clusters/{cid}/nodes/{nid}/delete-preflight
//	GET    /v1/clusters/{cid}/services/wireguard
//	POST   /v1/clusters/{cid}/services/wireguard
//	GET    /v1/clusters/{cid}/services/wireguard/{id}[?since=&wait=|&stream=1]
//	POST   /v1/clusters/{cid}/services/wireguard/{id}/move-plan
//	POST   /v1/clusters/{cid}/services/wireguard/{id}/moves
//	GET    /v1/moves/{id}[?since=&wait=|&stream=1]
//	POST   /v1/devices
//	PUT    /v1/devices/{id}/clusters/{cid}             join: returns ClusterConfig
//	DELETE /v1/devices/{id}/clusters/{cid}             leave
//	GET    /v1/devices/{id}/map[?since=&wait=|&stream=1]
//	GET    /v1/gateway/map[?since=&wait=|&stream=1]    enrollment token
//	POST   /v1/gateway/report                          enrollment token
//	POST   /v1/devices/{id}/clusters/{cid}/relay-ticket
//	POST   /v1/gateway/relay-check                     enrollment token
//	PUT    /v1/clusters/{cid}/services/wireguard/{id}/relay
//
// OAuth 2.0 (not under /v1): /oauth/authorize, /oauth/token,
// /oauth/device/code, /oauth/device, /.well-known/oauth-authorization-server.
const (
	PathAuthorize    = "/oauth/authorize"
	PathToken        = "/oauth/token"
	PathDeviceCode   = "/oauth/device/code"
	PathDeviceVerify = "/oauth/device"
)

// Client talks to runos-control. The zero value is not usable; use NewClient.
type Client struct {
	BaseURL string       // e.g. https://198.51.100.10
	Token   string       // bearer token
	HTTP    *http.Client // verifies control's certificate
	// StreamHTTP carries the push streams (the Watch methods); nil: HTTP.
	// NewClient makes it HTTP/1.1 only, which costs control the least
	// per held stream (docs/performance.md "Push by stream").
	StreamHTTP *http.Client

	// resumes are the streams' resume tokens by path (HeaderResume),
	// shared by the copies of a client with the same token; nil (a Client
	// not made by NewClient): streams are not resumed.
	resumes *resumeBook
}

// ClientOption changes what NewClient accepts.
type ClientOption func(*clientOptions)

type clientOptions struct{ allowHTTP bool }

// AllowHTTP lets NewClient take an http:// URL when allow is true: only a
// process started with --insecure-http passes true (see ParseControlURL).
func AllowHTTP(allow bool) ClientOption { return func(o *clientOptions) { o.allowHTTP = allow } }

// NewClient returns a client for baseURL that trusts the CA in caFile when
// it is not empty (else the system roots). baseURL must be https:// (see
// ParseControlURL): a bearer token is never sent in clear text unless the
// process was started with --insecure-http and says so with AllowHTTP.
func NewClient(baseURL, token, caFile string, opts ...ClientOption) (*Client, error) {
	var o clientOptions
	for _, opt := range opts {
		opt(&o)
	}
	base, err := ParseControlURL(baseURL, o.allowHTTP)
	if err != nil {
		return nil, err
	}
	var pool *x509.CertPool
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", caFile)
		}
	}
	transport := func() *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if pool != nil {
			t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		return t
	}
	tr := transport()
	tr.MaxIdleConnsPerHost = 16
	// A stream holds its own connection for as long as it lasts, on
	// HTTP/1.1: control then serves it with no goroutine of its own. (A
	// transport of its own: a clone of tr would offer h2 in its TLS
	// handshake, which tr has set up by then.)
	st := transport()
	st.Protocols = new(http.Protocols)
	st.Protocols.SetHTTP1(true)
	st.MaxIdleConnsPerHost = 1
	return &Client{
		BaseURL:    base,
		Token:      token,
		HTTP:       &http.Client{Transport: tr},
		StreamHTTP: &http.Client{Transport: st},
		resumes:    &resumeBook{},
	}, nil
}

// WithToken returns a copy of c that sends token.
func (c *Client) WithToken(token string) *Client {
	cc := *c
	cc.Token = token
	if c.resumes != nil {
		cc.resumes = &resumeBook{} // another sign-in's are no use
	}
	return &cc
}

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Do sends a JSON request and decodes a JSON answer into out (when not nil).
// A non-2xx answer is returned as *Error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return answerError(resp.StatusCode, method, path, b)
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

func pollQuery(since uint64, wait time.Duration) string {
	q := url.Values{}
	q.Set(ParamSince, strconv.FormatUint(since, 10))
	if wait > 0 {
		q.Set(ParamWait, strconv.Itoa(int(wait/time.Second)))
	}
	return "?" + q.Encode()
}

func esc(s string) string { return url.PathEscape(s) }

// Me returns who the token belongs to.
func (c *Client) Me(ctx context.Context) (*Me, error) {
	var m Me
	return &m, c.Do(ctx, http.MethodGet, "/v1/me", nil, &m)
}

// EndSession ends the caller's session on the server.
func (c *Client) EndSession(ctx context.Context) error {
	return c.Do(ctx, http.MethodDelete, "/v1/sessions/current", nil, nil)
}

// Clusters lists the clusters the caller can reach.
func (c *Client) Clusters(ctx context.Context) ([]Cluster, error) {
	var cs []Cluster
	return cs, c.Do(ctx, http.MethodGet, "/v1/clusters", nil, &cs)
}

// Cluster returns one cluster with its nodes, services and DNS records.
func (c *Client) Cluster(ctx context.Context, cid string) (*ClusterDetail, error) {
	var d ClusterDetail
	return &d, c.Do(ctx, http.MethodGet, "/v1/clusters/"+esc(cid), nil, &d)
}

// Nodes lists a cluster's nodes.
func (c *Client) Nodes(ctx context.Context, cid string) ([]Node, error) {
	var ns []Node
	return ns, c.Do(ctx, http.MethodGet, "/v1/clusters/"+esc(cid)+"/nodes", nil, &ns)
}

// Node returns one node.
func (c *Client) Node(ctx context.Context, cid, nid string) (*Node, error) {
	var n Node
	return &n, c.Do(ctx, http.MethodGet, "/v1/clusters/"+esc(cid)+"/nodes/"+esc(nid), nil, &n)
}

// SetNodeIngress sets a node's declared ingress address and publication.
func (c *Client) SetNodeIngress(ctx context.Context, cid, nid string, r NodeIngressRequest) (*Node, error) {
	var n Node
	return &n, c.Do(ctx, http.MethodPut, "/v1/clusters/"+esc(cid)+"/nodes/"+esc(nid)+"/ingress", r, &n)
}

// DeleteNode removes a node.
func (c *Client) DeleteNode(ctx context.Context, cid, nid string, resetCluster bool) error {
	p := "/v1/clusters/" + esc(cid) + "/nodes/" + esc(nid)
	if resetCluster {
		p += "?resetCluster=true"
	}
	return c.Do(ctx, http.MethodDelete, p, nil, nil)
}

// DeletePreflight says what removing a node would warn about or refuse.
func (c *Client) DeletePreflight(ctx context.Context, cid, nid string) (*DeletePreflight, error) {
	var d DeletePreflight
	return &d, c.Do(ctx, http.MethodGet, "/v1/clusters/"+esc(cid)+"/nodes/"+esc(nid)+"/delete-preflight", nil, &d)
}

func servicesPath(cid string) string { return "/v1/clusters/" + esc(cid) + "/services/wireguard" }

// VPNServices lists a cluster's WireGuard services (zero or one).
func (c *Client) VPNServices(ctx context.Context, cid string) ([]VPNService, error) {
	var ss []VPNService
	return ss, c.Do(ctx, http.MethodGet, servicesPath(cid), nil, &ss)
}

// AddVPNService installs the cluster's WireGuard server.
func (c *Client) AddVPNService(ctx context.Context, cid string, r AddVPNServiceRequest) (*VPNService, error) {
	var s VPNService
	return &s, c.Do(ctx, http.MethodPost, servicesPath(cid), r, &s)
}

// VPNService returns a service; with since > 0 it waits (up to wait) for a
// version newer than since.
func (c *Client) VPNService(ctx context.Context, cid, id string, since uint64, wait time.Duration) (*VPNService, error) {
	var s VPNService
	return &s, c.Do(ctx, http.MethodGet, servicesPath(cid)+"/"+esc(id)+pollQuery(since, wait), nil, &s)
}

// MovePlan tells what a move would give devices, changing nothing.
func (c *Client) MovePlan(ctx context.Context, cid, id, target string) (*MovePlan, error) {
	var p MovePlan
	return &p, c.Do(ctx, http.MethodPost, servicesPath(cid)+"/"+esc(id)+"/move-plan", MoveRequest{TargetNodeID: target}, &p)
}

// StartMove starts moving a service to another node.
func (c *Client) StartMove(ctx context.Context, cid, id, target string) (*Move, error) {
	var m Move
	return &m, c.Do(ctx, http.MethodPost, servicesPath(cid)+"/"+esc(id)+"/moves", MoveRequest{TargetNodeID: target}, &m)
}

// Move returns a move; with since > 0 it waits for a newer version.
func (c *Client) Move(ctx context.Context, id string, since uint64, wait time.Duration) (*Move, error) {
	var m Move
	return &m, c.Do(ctx, http.MethodGet, "/v1/moves/"+esc(id)+pollQuery(since, wait), nil, &m)
}

// RegisterDevice registers the device's public key and binds the session to it.
func (c *Client) RegisterDevice(ctx context.Context, r RegisterDeviceRequest) (*Device, error) {
	var d Device
	return &d, c.Do(ctx, http.MethodPost, "/v1/devices", r, &d)
}

// JoinCluster joins the device to a cluster and returns its VPN config.
func (c *Client) JoinCluster(ctx context.Context, deviceID, cid string) (*ClusterConfig, error) {
	var cc ClusterConfig
	return &cc, c.Do(ctx, http.MethodPut, "/v1/devices/"+esc(deviceID)+"/clusters/"+esc(cid), nil, &cc)
}

// LeaveCluster removes the device from a cluster.
func (c *Client) LeaveCluster(ctx context.Context, deviceID, cid string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/devices/"+esc(deviceID)+"/clusters/"+esc(cid), nil, nil)
}

// DeviceMap long-polls the device's map: it returns when the map's version is
// newer than since, or after wait with the current map.
func (c *Client) DeviceMap(ctx context.Context, deviceID string, since uint64, wait time.Duration) (*DeviceMap, error) {
	var m DeviceMap
	return &m, c.Do(ctx, http.MethodGet, "/v1/devices/"+esc(deviceID)+"/map"+pollQuery(since, wait), nil, &m)
}

// GatewayMap long-polls a gateway's map (token: the node's enrollment token).
func (c *Client) GatewayMap(ctx context.Context, since uint64, wait time.Duration) (*GatewayMap, error) {
	var m GatewayMap
	return &m, c.Do(ctx, http.MethodGet, "/v1/gateway/map"+pollQuery(since, wait), nil, &m)
}

// GatewayReport sends a heartbeat with the gateway's facts.
func (c *Client) GatewayReport(ctx context.Context, r GatewayReport) error {
	return c.Do(ctx, http.MethodPost, "/v1/gateway/report", r, nil)
}

// RelayTicket asks control for the ticket the device shows the relay of
// cid's VPN node.
func (c *Client) RelayTicket(ctx context.Context, deviceID, cid string) (*RelayTicket, error) {
	var out RelayTicket
	return &out, c.Do(ctx, http.MethodPost, "/v1/devices/"+esc(deviceID)+"/clusters/"+esc(cid)+"/relay-ticket", nil, &out)
}

// RelayCheck asks control whether a device may open a relay stream to this
// gateway (token: the node's enrollment token).
func (c *Client) RelayCheck(ctx context.Context, r RelayCheckRequest) (*RelayCheck, error) {
	var out RelayCheck
	return &out, c.Do(ctx, http.MethodPost, "/v1/gateway/relay-check", r, &out)
}

// SetServiceRelay sets (or, with "", resets) the relay URL devices are given.
func (c *Client) SetServiceRelay(ctx context.Context, cid, id string, r SetRelayRequest) (*VPNService, error) {
	var out VPNService
	return &out, c.Do(ctx, http.MethodPut, servicesPath(cid)+"/"+esc(id)+"/relay", r, &out)
}
