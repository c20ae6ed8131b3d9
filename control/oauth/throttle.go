package oauth

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Sign-in attempts slow down per user at a source address and per source
// address, in counters
// the GrantStore keeps (the database, shared by every replica), so parallel
// guesses sent to several replicas count as one stream.
//
// The check and the count are one step: an attempt reserves its place by
// counting itself as a failure before the password is checked (Count runs
// both under one lock), and is refunded if the password was right. Thirty
// wrong passwords sent at once thus get the free attempts and no more: the
// others are refused before any password is checked.
//
// The user's counter is kept per address too: guesses at alice's password
// from elsewhere slow down that elsewhere, never alice at her own address
// (a known email must not be enough to lock its owner out). An address
// guessing many users is still slowed by its own counter.

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

// wait is how long from now an attempt on a key with counter c (free
// failures allowed) must wait; 0 means now.
func (p throttlePolicy) wait(c Counter, free int, now time.Time) time.Duration {
	d := p.delay(c.N, free)
	if d == 0 {
		// Within the free attempts. (A request whose clock was read just
		// before another's counted must not wait for it.)
		return 0
	}
	until := c.Last.Add(d)
	if !now.Before(until) {
		return 0
	}
	return until.Sub(now)
}

// userKey is a user at an address (addrOf). It folds case and surrounding
// space, so that a guesser cannot get fresh attempts by spelling the same
// account differently.
func userKey(user, remoteAddr string) string {
	return "u:" + strings.ToLower(strings.TrimSpace(user)) + "@" + addrOf(remoteAddr)
}

// addrKey is the client's address from RemoteAddr; IPv6 clients are keyed
// by their /64, which one host usually holds whole.
func addrKey(remoteAddr string) string { return "a:" + addrOf(remoteAddr) }

func addrOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// attempt is one sign-in attempt holding its place in the counters.
type attempt struct {
	s          *Server
	user, addr string    // their counters' keys; user "" when none
	at         time.Time // when it was counted
	addrLast   time.Time // the address's last failure before it
}

// reserve counts an attempt for user (may be empty: the device page checks
// a user code before any user is known) from remoteAddr. It returns how
// long to wait when the attempt must not be made now (nothing counted),
// else the reservation to settle with ok or fail.
func (s *Server) reserve(ctx context.Context, user, remoteAddr string, now time.Time) (time.Duration, *attempt, error) {
	keys := []string{addrKey(remoteAddr)}
	free := []int{s.pol.addrFree}
	if user != "" {
		keys = append(keys, userKey(user, remoteAddr))
		free = append(free, s.pol.userFree)
	}
	var wait time.Duration
	var addrLast time.Time
	err := s.cfg.Store.Count(ctx, now, keys, func(cur []Counter) []Counter {
		wait, addrLast = 0, cur[0].Last
		for i, c := range cur {
			wait = max(wait, s.pol.wait(c, free[i], now))
		}
		if wait > 0 {
			return cur
		}
		next := make([]Counter, len(cur))
		for i, c := range cur {
			if c.N == 0 {
				c.First = now
			}
			next[i] = Counter{N: c.N + 1, First: c.First, Last: now, Expires: now.Add(s.pol.forget())}
		}
		return next
	})
	if err != nil || wait > 0 {
		return wait, nil, err
	}
	a := &attempt{s: s, addr: keys[0], at: now, addrLast: addrLast}
	if user != "" {
		a.user = keys[1]
	}
	return 0, a, nil
}

// ok settles a right attempt: the user's failures are forgotten, and the
// address gets its reserved place back. Its earlier failures stay: signing
// in to one's own account must not buy fresh guesses at others from the
// same address.
func (a *attempt) ok(ctx context.Context, now time.Time) {
	keys := []string{a.addr}
	if a.user != "" {
		keys = append(keys, a.user)
	}
	err := a.s.cfg.Store.Count(ctx, now, keys, func(cur []Counter) []Counter {
		next := []Counter{cur[0]}
		if next[0].N > 0 {
			next[0].N--
			if next[0].Last.Equal(a.at) { // no failure counted since ours
				next[0].Last = a.addrLast
			}
		}
		if next[0].N == 0 {
			next[0] = Counter{}
		}
		if len(cur) > 1 {
			next = append(next, Counter{}) // the user's count: forgotten
		}
		return next
	})
	if err != nil {
		a.s.log.Error("oauth: settle a right sign-in attempt", "err", err)
	}
}

// deviceCodeLimit bounds POST /oauth/device/code per source address: at
// most n device codes per window. It returns how long to wait when the
// address is over (nothing counted), 0 when the request may go on (counted).
func (s *Server) deviceCodeLimit(ctx context.Context, remoteAddr string, now time.Time) (time.Duration, error) {
	n, window := s.cfg.DeviceCodesPerAddr, s.cfg.DeviceCodeWindow
	var wait time.Duration
	err := s.cfg.Store.Count(ctx, now, []string{"d:" + addrOf(remoteAddr)}, func(cur []Counter) []Counter {
		c := cur[0]
		if c.N == 0 || !now.Before(c.First.Add(window)) {
			c = Counter{First: now}
		}
		if c.N >= n {
			wait = c.First.Add(window).Sub(now)
			return cur
		}
		wait = 0
		c.N++
		c.Last, c.Expires = now, c.First.Add(window)
		return []Counter{c}
	})
	return wait, err
}
