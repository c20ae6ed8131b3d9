package api

import (
	"fmt"
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
// fragment, where host may be RelayIngress.
func CheckRelayURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(s, RelayIngress, "192.0.2.1"))
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("relay URL %q: want https://host[:port]/path (host may be %s)", s, RelayIngress)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("relay URL %q: want https://host[:port]/path with no user, query or fragment", s)
	}
	return nil
}
