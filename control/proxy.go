package control

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// behindProxies makes the client's address what a trusted load balancer
// says it is: a request from one of trusted (HAProxy in front of the
// replicas) carries the client's address as the last X-Forwarded-For
// entry, which the balancer appended itself. The sign-in slow-down, the
// device-code limit and a gateway's detected address all key on it. From
// anywhere else the header is ignored, so a client cannot pick its own
// address.
func behindProxies(trusted []netip.Prefix, next http.Handler) http.Handler {
	if len(trusted) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := forwardedFor(r, trusted); ok {
			r2 := *r
			r2.RemoteAddr = net.JoinHostPort(a.String(), "0")
			r = &r2
		}
		next.ServeHTTP(w, r)
	})
}

func forwardedFor(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !containsAddr(trusted, peer.Addr().Unmap()) {
		return netip.Addr{}, false
	}
	vs := r.Header.Values("X-Forwarded-For")
	if len(vs) == 0 {
		return netip.Addr{}, false
	}
	parts := strings.Split(vs[len(vs)-1], ",")
	a, err := netip.ParseAddr(strings.TrimSpace(parts[len(parts)-1]))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// replicaHeader names the replica that answered, in RunOS-Replica, when
// it has a name: with several replicas behind one address, which one held
// a long-poll is then visible (tests and debugging). Off by default.
func replicaHeader(name string, next http.Handler) http.Handler {
	if name == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Runos-Replica"] = []string{name}
		next.ServeHTTP(w, r)
	})
}
