package relay

import (
	"context"
	"net"
	"net/http"
	"net/url"
)

// checkCaptive asks the relay's host for a page over plain HTTP, following
// no redirect. A captive portal, which holds back UDP and HTTPS until its
// sign-in page is done, answers plain HTTP for any host with a redirect to
// itself (or 511 Network Authentication Required, RFC 6585); the node's
// own answer (a page, or a redirect to HTTPS on the same host) is not one.
// It reports the portal's address when it found one.
func checkCaptive(ctx context.Context, relayURL string) (string, bool) {
	u, err := url.Parse(relayURL)
	if err != nil {
		return "", false
	}
	probe := &url.URL{Scheme: "http", Host: u.Hostname(), Path: "/"}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.To4() == nil {
		probe.Host = "[" + u.Hostname() + "]"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe.String(), nil)
	if err != nil {
		return "", false
	}
	client := &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", false
	}
	resp.Body.Close()
	return portalOf(resp, u.Hostname())
}

// portalOf decides from the answer to plain HTTP whether a portal answered.
func portalOf(resp *http.Response, host string) (string, bool) {
	if resp.StatusCode == http.StatusNetworkAuthenticationRequired {
		return "", true
	}
	if resp.StatusCode < 300 || resp.StatusCode > 399 {
		return "", false
	}
	loc, err := resp.Location()
	if err != nil || loc.Hostname() == "" || loc.Hostname() == host {
		return "", false // no target, or the node's own redirect (to HTTPS)
	}
	return loc.Scheme + "://" + loc.Host, true
}
