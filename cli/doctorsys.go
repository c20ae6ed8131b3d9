package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/runos/vpn/installer"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/localapi"
)

// doctorSys is everything the doctor's checks touch outside the process,
// injected so that the checks' logic is tested without a daemon, a network
// or root (doctor_test.go), and run for real against a lab (e2e).
type doctorSys struct {
	Daemon  doctorDaemon
	Service func() (*installer.ServiceStatus, error)
	// ControlClock asks control for its time (its Date header) and says
	// how long the round trip took.
	ControlClock func(ctx context.Context, apiURL string) (at time.Time, rtt time.Duration, err error)
	RouteTo      func(dst netip.Addr) (string, error)
	Routes       func() ([]platform.Route, error)
	LocalAddrs   func() ([]netip.Prefix, error)
	// LookupHost resolves through this machine's resolver (what every
	// program gets), not a DNS client of ours.
	LookupHost func(ctx context.Context, name string) ([]string, error)
	// HTTPS opens https://serverName/ at addr:443 and returns the status line.
	HTTPS func(ctx context.Context, addr netip.Addr, serverName string) (string, error)
	// UDPAnswer sends one datagram that WireGuard ignores to ep and says
	// whether the host refused it (nothing listens: ICMP port unreachable)
	// or stayed silent.
	UDPRefused func(ctx context.Context, ep netip.AddrPort) (refused bool, err error)
	// ResolvConf is /etc/resolv.conf's content (Linux's resolv.conf mode).
	ResolvConf func() ([]byte, error)
	// Browser reports whether a browser is likely to open cluster pages
	// here (a desktop session, or $BROWSER).
	Browser func() bool
}

// doctorDaemon is the part of the local API client the doctor uses.
type doctorDaemon interface {
	Status(ctx context.Context) (*localapi.Status, error)
	Version(ctx context.Context) (*localapi.Version, error)
	Probe(ctx context.Context, r localapi.ProbeRequest) (*localapi.ProbeResult, error)
}

// doctorSys is the real thing; service is the service's name ("" = the default).
func (a *app) doctorSys(service string) *doctorSys {
	return &doctorSys{
		Daemon: a.daemon(),
		Service: func() (*installer.ServiceStatus, error) {
			return installer.Status(installer.Options{Name: service, Socket: a.socketPath(), Getenv: a.env.Getenv})
		},
		ControlClock: a.controlClock,
		RouteTo:      platform.RouteTo,
		Routes:       platform.Routes,
		LocalAddrs:   localAddrs,
		LookupHost:   net.DefaultResolver.LookupHost,
		HTTPS:        httpsAnswer,
		UDPRefused:   udpRefused,
		ResolvConf:   func() ([]byte, error) { return os.ReadFile("/etc/resolv.conf") },
		Browser: func() bool {
			if runtime.GOOS != "linux" {
				return true // macOS and Windows are desktops
			}
			return a.env.Getenv("DISPLAY") != "" || a.env.Getenv("WAYLAND_DISPLAY") != "" || a.env.Getenv("BROWSER") != ""
		},
	}
}

// controlClock reads control's Date header from an unauthenticated GET
// /v1/me (a 401 is an answer) with the configured CA.
func (a *app) controlClock(ctx context.Context, apiURL string) (time.Time, time.Duration, error) {
	e, err := a.effective()
	if err != nil {
		return time.Time{}, 0, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return time.Time{}, 0, fmt.Errorf("ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return time.Time{}, 0, fmt.Errorf("ca-file %s: no certificate", e.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/v1/me", nil)
	if err != nil {
		return time.Time{}, 0, err
	}
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return time.Time{}, 0, err
	}
	resp.Body.Close()
	rtt := time.Since(start)
	at, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return time.Time{}, rtt, fmt.Errorf("control's answer has no Date: %w", err)
	}
	return at, rtt, nil
}

func localAddrs() ([]netip.Prefix, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if p, err := netip.ParsePrefix(n.String()); err == nil {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// httpsAnswer is GET https://serverName/ sent to addr:443. The certificate
// is not verified: this checks that the cluster's ingress answers through
// the tunnel (Traefik's certificate may still be its default one), and
// nothing secret is sent.
func httpsAnswer(ctx context.Context, addr netip.Addr, serverName string) (string, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, netip.AddrPortFrom(addr, 443).String())
		},
		TLSClientConfig:   &tls.Config{ServerName: serverName, InsecureSkipVerify: true}, //nolint:gosec // a reachability check; nothing is sent
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+serverName+"/", nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return resp.Status, nil
}

// udpRefused sends a one-byte datagram (WireGuard drops it unread) from a
// connected socket: an ICMP port unreachable comes back as ECONNREFUSED on
// the next read, silence as a timeout.
func udpRefused(ctx context.Context, ep netip.AddrPort) (bool, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", ep.String())
	if err != nil {
		return false, err
	}
	defer c.Close()
	deadline := time.Now().Add(time.Second)
	_ = c.SetDeadline(deadline)
	buf := make([]byte, 64)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte{0}); err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				return true, nil
			}
			return false, err
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(buf)
		if errors.Is(err, syscall.ECONNREFUSED) {
			return true, nil
		}
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			return false, err
		}
	}
	return false, nil
}
