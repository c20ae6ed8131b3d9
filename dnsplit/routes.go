package dnsplit

import (
	"fmt"
	"strings"
)

// normalizeRoutes checks routes before anything is changed and returns them
// with domains in one spelling (lower case, no leading or trailing dot).
// Domains become file names (/etc/resolver/<domain>) and registry values, so
// only host-name characters pass: a bad route is refused whole.
func normalizeRoutes(routes []Route) ([]Route, error) {
	out := make([]Route, 0, len(routes))
	for _, r := range routes {
		if !r.Server.IsValid() || r.Server.IsUnspecified() || r.Server.IsMulticast() {
			return nil, fmt.Errorf("dns: cluster %s: %q is not a DNS server address", r.CID, r.Server)
		}
		n := Route{CID: r.CID, Server: r.Server.Unmap()}
		for _, d := range r.Domains {
			d = strings.ToLower(strings.Trim(strings.TrimPrefix(d, "~"), "."))
			if err := checkDomain(d); err != nil {
				return nil, fmt.Errorf("dns: cluster %s: domain %q: %w", r.CID, d, err)
			}
			n.Domains = append(n.Domains, d)
		}
		if len(n.Domains) > 0 {
			out = append(out, n)
		}
	}
	return out, nil
}

func checkDomain(d string) error {
	if d == "" || len(d) > 253 {
		return fmt.Errorf("empty or longer than 253 characters")
	}
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("empty or over-long label")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with a hyphen", l)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not a host-name character", c)
			}
		}
	}
	return nil
}
