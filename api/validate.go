package api

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// CheckCID returns an error unless s is a valid cluster id: 3 to 16
// lowercase letters and digits (the product docs). Callers check before
// making any request.
func CheckCID(s string) error {
	if len(s) < 3 || len(s) > 16 {
		return fmt.Errorf("invalid cid %q: a cid is 3 to 16 lowercase letters and digits", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return fmt.Errorf("invalid cid %q: a cid is 3 to 16 lowercase letters and digits", s)
		}
	}
	return nil
}

// RelayIngress stands, in a service's relay URL, for the hosting node's
// ingress address, so a relay URL set once follows every move.
const RelayIngress = "{ingress}"

// CheckRelayURL returns an error unless s is a usable relay URL override:
// "" (the default), or https://host[:port]/path with no user, query or
// fragment, where host may be RelayIngress. Where the host must be is
// control's to check (it must be the hosting node's ingress address, or a
// name that resolves to it).
func CheckRelayURL(s string) error {
	if s == "" {
		return nil
	}
	_, err := ParseRelayURL(strings.ReplaceAll(s, RelayIngress, "192.0.2.1"))
	if err != nil {
		return fmt.Errorf("%w (host may be %s)", err, RelayIngress)
	}
	return nil
}

// ParseRelayURL is the one check of a relay URL as devices are given it:
// https://host[:port]/path with no user, query or fragment.
func ParseRelayURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "" || u.Opaque != "" {
		return nil, fmt.Errorf("relay URL %q: want https://host[:port]/path", s)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("relay URL %q: want https://host[:port]/path with no user, query or fragment", s)
	}
	return u, nil
}

// RelayHostIs checks that relay URL u is on the VPN node at addr: its host
// is addr itself, or a name (which whoever dials or accepts it must find
// resolves to addr). A relay on any other address would be handed the
// device's relay ticket and its traffic.
func RelayHostIs(u *url.URL, addr netip.Addr) (name string, err error) {
	h := u.Hostname()
	if a, perr := netip.ParseAddr(h); perr == nil {
		if a.Unmap() != addr.Unmap() {
			return "", fmt.Errorf("relay %s is on %s, not the VPN node's address %s", u.Redacted(), a, addr)
		}
		return "", nil
	}
	return h, nil
}
