//go:build !windows

package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// ReadyTimeout bounds the wait for each program of the lab.
const ReadyTimeout = 60 * time.Second

// Dial connects from inside a host's network namespace (this process
// stays where it is; only the socket lives in the host).
func (l *Lab) Dial(ctx context.Context, host, network, addr string) (net.Conn, error) {
	return dialIn(ctx, netnsPath(l.names.Netns(host)), network, addr)
}

// ListenPacket opens a packet socket (UDP) inside a host's network
// namespace, as Dial does: a test's listener on a node, for instance.
func (l *Lab) ListenPacket(host, network, addr string) (net.PacketConn, error) {
	return listenPacketIn(netnsPath(l.names.Netns(host)), network, addr)
}

// HTTPClient is an HTTP client whose connections start inside a host and
// that trusts the lab's CA.
func (l *Lab) HTTPClient(host string) (*http.Client, error) {
	pem, err := os.ReadFile(l.caFile())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("lab CA %s: no certificate", l.caFile())
	}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return l.Dial(ctx, host, network, addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}, Timeout: 10 * time.Second}, nil
}

// APIClient is a control client from inside a host with the given token.
func (l *Lab) APIClient(host, token string) (*api.Client, error) {
	hc, err := l.HTTPClient(host)
	if err != nil {
		return nil, err
	}
	return &api.Client{BaseURL: l.apiURL(), Token: token, HTTP: hc}, nil
}

// waitProc returns once p is ready, or with an error naming the program,
// what was not ready and the end of its log.
func (l *Lab) waitProc(ctx context.Context, p Proc) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	check := l.readyCheck(p)
	var last error
	for {
		rec, ok := l.Proc(p.Host, p.Name)
		if !ok || !rec.Alive() {
			return fmt.Errorf("%s on %s exited before it was ready%s", p.Name, p.Host, l.logTail(rec.Log))
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s on %s not ready after %s: %v%s", p.Name, p.Host, ReadyTimeout, last, l.logTail(rec.Log))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail is the end of a log, to put in an error.
func (l *Lab) logTail(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "\n  last lines of " + path + ":\n    " + strings.Join(lines, "\n    ")
}

func (l *Lab) readyCheck(p Proc) func(context.Context) error {
	switch p.Name {
	case "dnsmasq":
		return func(ctx context.Context) error {
			_, err := l.Resolve(ctx, p.Host, "www.example.test")
			return err
		}
	case "postgres":
		return l.databaseReady
	case "idp":
		return l.idpReady
	case "haproxy":
		return func(ctx context.Context) error {
			body, err := l.Get(ctx, p.Host, l.apiURL()+"/readyz")
			if err != nil {
				return fmt.Errorf("HAProxy at %s: %v %s", l.apiURL(), err, strings.TrimSpace(body))
			}
			return nil
		}
	case "control":
		if l.topo.Replicas > 1 {
			return func(ctx context.Context) error { return l.replicaReady(ctx, p.Host) }
		}
		return func(ctx context.Context) error {
			c, err := l.APIClient(p.Host, "")
			if err != nil {
				return err
			}
			_, err = c.Me(ctx)
			var ae *api.Error
			if errors.As(err, &ae) {
				return nil // an answer: control is serving
			}
			if err == nil {
				return errors.New("GET /v1/me without a token answered 200")
			}
			return err
		}
	case "webapp":
		h, _ := l.topo.Host(p.Host)
		return func(ctx context.Context) error {
			body, err := l.Get(ctx, p.Host, "http://"+h.Addrs[WAN].String()+"/")
			if err != nil {
				return err
			}
			if want := WebAppBody(h.CID, h.NID); !strings.Contains(body, want) {
				return fmt.Errorf("web app answered %q, want %q", body, want)
			}
			return nil
		}
	case "gateway":
		h, _ := l.topo.Host(p.Host)
		return func(ctx context.Context) error { return l.gatewayReady(ctx, h.CID, h.NID) }
	case "portal":
		return func(ctx context.Context) error {
			c, err := l.Dial(ctx, p.Host, "tcp", PortalListen)
			if err == nil {
				c.Close()
			}
			return err
		}
	case "prometheus":
		return l.prometheusReady
	case "vpnd":
		return func(ctx context.Context) error {
			_, err := localapi.NewClient(l.SocketPath(p.Host)).Status(ctx)
			return err
		}
	case meshProc:
		return l.meshReady(p)
	case "kubedns", "kubeapi", "podapp":
		return l.insideReady(p)
	}
	return func(context.Context) error { return nil }
}

// gatewayReady: control sees the node's gateway heartbeat, and when the
// node hosts its cluster's VPN service, the service is serving.
func (l *Lab) gatewayReady(ctx context.Context, cid, nid string) error {
	c, err := l.APIClient("control", l.secrets.OperatorToken)
	if err != nil {
		return err
	}
	n, err := c.Node(ctx, cid, nid)
	if err != nil {
		return fmt.Errorf("control about node %s/%s: %w", cid, nid, err)
	}
	if n.Status != api.NodeReady {
		return fmt.Errorf("node %s/%s is %s", cid, nid, n.Status)
	}
	if !n.HostsVPN {
		return nil
	}
	ss, err := c.VPNServices(ctx, cid)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if s.NodeID == nid && s.State != api.ServiceServing {
			return fmt.Errorf("VPN service %s on %s/%s is %s %s", s.ID, cid, nid, s.State, s.Error)
		}
	}
	return nil
}

// Get fetches a URL from inside a host and returns the body (an error for
// a non-2xx answer).
func (l *Lab) Get(ctx context.Context, host, url string) (string, error) {
	hc, err := l.HTTPClient(host)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// Resolve asks the LAN resolver, from inside a host, for a name's A
// records. A name it does not know is an error with the answer's code.
func (l *Lab) Resolve(ctx context.Context, host, name string) ([]string, error) {
	return l.ResolveAt(ctx, host, net.JoinHostPort(l.topo.ResolverIP.String(), "53"), name)
}

// ResolveAt is Resolve asking the DNS server at server (ip:port).
func (l *Lab) ResolveAt(ctx context.Context, host, server, name string) ([]string, error) {
	c, err := l.Dial(ctx, host, "udp", server)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	}
	co := &dns.Conn{Conn: c}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	if err := co.WriteMsg(q); err != nil {
		return nil, err
	}
	r, err := co.ReadMsg()
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s: %s", name, dns.RcodeToString[r.Rcode])
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no address", name)
	}
	return out, nil
}
