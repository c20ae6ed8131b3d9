package server

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/runos/vpn/api"
)

// Long-polls and streams are held open on purpose, so a body deadline
// cannot bound them (control's bodyDeadline leaves them, which carry no
// body, alone). Their own rule: one token holds at most
// Config.MaxHeldPerToken of them at once, and one device's map at most
// maxHeldPerDevice (a daemon holds one; a reconnect may overlap the old
// one for a moment). Past that a request is answered 429 at once.
const (
	defaultMaxHeldPerToken = 100
	maxHeldPerDevice       = 8
)

// holds counts the requests held per key.
type holds struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more for each key, unless one of them holds max[i]
// already (then nothing is counted and i is that key's index).
func (h *holds) take(keys []string, max []int) (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	for i, k := range keys {
		if h.n[k] >= max[i] {
			return i, false
		}
	}
	for _, k := range keys {
		h.n[k]++
	}
	return 0, true
}

func (h *holds) give(keys []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		if h.n[k] <= 1 {
			delete(h.n, k)
		} else {
			h.n[k]--
		}
	}
}

// hold counts a long-poll or stream of p's against its allowances; the
// returned release gives the place back. kind is the document held.
func (s *Server) hold(r *http.Request, kind string, p *principal) (release func(), e *api.Error) {
	keys, max := []string{"t:" + p.hash}, []int{s.cfg.MaxHeldPerToken}
	if kind == api.EventDeviceMap {
		// Keyed by the caller's user too: another user's requests for
		// this device (answered 404) never take its places.
		keys, max = append(keys, deviceHoldKey(p.user.Email, r.PathValue("id"))), append(max, maxHeldPerDevice)
	}
	i, ok := s.held.take(keys, max)
	if !ok {
		msg := fmt.Sprintf("this token holds %d streams and long-polls already", max[i])
		if i == 1 {
			msg = fmt.Sprintf("device %s's map is held open %d times already", r.PathValue("id"), max[i])
		}
		return nil, &api.Error{Status: http.StatusTooManyRequests, Code: api.CodeTooMany, Message: msg,
			Hint: "close the streams this token no longer needs (or wait for them to end), then retry"}
	}
	return func() { s.held.give(keys) }, nil
}

func deviceHoldKey(user, id string) string { return "d:" + user + "/" + id }
