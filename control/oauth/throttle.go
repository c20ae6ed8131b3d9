package oauth

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// throttlePolicy says when wrong passwords slow down. After free failures
// for a key, the next attempt must wait base after the last failure, and
// each further failure doubles the wait, up to max. A key with no failure
// for forget() is forgotten.
type throttlePolicy struct {
	userFree, addrFree int
	base, max          time.Duration
}

func (p throttlePolicy) delay(failures, free int) time.Duration {
	if failures < free {
		return 0
	}
	d := p.base
	for i := free; i < failures && d < p.max; i++ {
		d *= 2
	}
	return min(d, p.max)
}

func (p throttlePolicy) forget() time.Duration { return max(4*p.max, 15*time.Minute) }

// throttle counts wrong passwords per user and per source address. It lives
// in one process: replicas each slow down on their own, which still bounds
// guessing to a small multiple of one server's rate.
type throttle struct {
	pol  throttlePolicy
	mu   sync.Mutex
	keys map[string]*failures
}

type failures struct {
	n    int
	last time.Time
}

func newThrottle(p throttlePolicy) *throttle {
	return &throttle{pol: p, keys: make(map[string]*failures)}
}

// userKey folds case and surrounding space, so that a guesser cannot get
// fresh attempts by spelling the same account differently.
func userKey(user string) string { return "u:" + strings.ToLower(strings.TrimSpace(user)) }

// addrKey is the client's address from RemoteAddr; IPv6 clients are keyed
// by their /64, which one host usually holds whole.
func addrKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "a:" + host
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return "a:" + p.String()
	}
	return "a:" + a.String()
}

// wait reports how long from now the caller must wait before a password
// for user from remoteAddr (an http.Request.RemoteAddr) is checked again;
// 0 means check it now. user may be empty (the device page checks a user
// code before any user is known).
func (t *throttle) wait(user, remoteAddr string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.waitLocked(addrKey(remoteAddr), t.pol.addrFree, now)
	if user != "" {
		w = max(w, t.waitLocked(userKey(user), t.pol.userFree, now))
	}
	return w
}

func (t *throttle) waitLocked(key string, free int, now time.Time) time.Duration {
	f := t.keys[key]
	if f == nil || now.Sub(f.last) > t.pol.forget() {
		return 0
	}
	until := f.last.Add(t.pol.delay(f.n, free))
	if !now.Before(until) {
		return 0
	}
	return until.Sub(now)
}

// fail records a wrong password (or a wrong user code) for user (if not
// empty) and remoteAddr.
func (t *throttle) fail(user, remoteAddr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.keys) > 10000 {
		t.pruneLocked(now)
	}
	t.failLocked(addrKey(remoteAddr), now)
	if user != "" {
		t.failLocked(userKey(user), now)
	}
}

func (t *throttle) failLocked(key string, now time.Time) {
	f := t.keys[key]
	if f == nil || now.Sub(f.last) > t.pol.forget() {
		f = &failures{}
		t.keys[key] = f
	}
	f.n++
	f.last = now
}

// succeed resets the user's count after a right password. The address's
// count stays: signing in to one's own account must not buy fresh guesses
// at others from the same address.
func (t *throttle) succeed(user string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, userKey(user))
}

func (t *throttle) pruneLocked(now time.Time) {
	for k, f := range t.keys {
		if now.Sub(f.last) > t.pol.forget() {
			delete(t.keys, k)
		}
	}
}
