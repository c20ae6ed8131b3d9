package server

import (
	"context"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// TestFollowLongPollsStopWhenTheCallerEnds: --follow's long-polls (a
// service, a move) check their caller again on every wake, as the device
// map's does: a session that is ended, or lapses, answers 401 at once,
// and an operator token no topic speaks for is checked at least every
// second.
func TestFollowLongPollsStopWhenTheCallerEnds(t *testing.T) {
	// The move stays preparing: only the caller's end may wake the polls.
	e := newEnv(t, func(c *Config) { c.MoveReadyTimeout = 48 * time.Hour })
	e.serve("ky3", "n1", newKey(t))
	e.heartbeat("ky3", "n2")
	ctx := context.Background()
	ada := e.signIn("ada@example.com")
	mv, err := ada.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := ada.VPNService(ctx, "ky3", "wg-ky3", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	follow := func(c *api.Client) (chan polled[*api.VPNService], chan polled[*api.Move]) {
		return poll(func() (*api.VPNService, error) {
				return c.VPNService(ctx, "ky3", "wg-ky3", svc.Version, 300*time.Second)
			}),
			poll(func() (*api.Move, error) { return c.Move(ctx, mv.ID, mv.Version, 300*time.Second) })
	}
	within := func(what string, start time.Time) {
		t.Helper()
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: answered after %s, want within a second", what, took)
		}
	}

	// Signed out: both answer 401 at the end of the session.
	sp, mp := follow(ada)
	e.waitWatchers(2)
	start := time.Now()
	if err := ada.EndSession(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = recv(t, sp)
	wantCode(t, err, 401, api.CodeUnauthorized)
	_, err = recv(t, mp)
	wantCode(t, err, 401, api.CodeUnauthorized)
	within("service and move polls after sign-out", start)

	// Lapsed: the expiry wakes them.
	ada = e.signIn("ada@example.com")
	sp, mp = follow(ada)
	e.waitWatchers(2)
	e.clk.Advance(24 * time.Hour)
	_, err = recv(t, sp)
	wantCode(t, err, 401, api.CodeSessionExpired)
	_, err = recv(t, mp)
	wantCode(t, err, 401, api.CodeSessionExpired)

	// An operator token revoked under the long-polls is refused at the next
	// second's check (no topic of the caller's wakes them).
	sp, mp = follow(e.op)
	e.waitWatchers(2)
	if _, err := e.signIn("ada@example.com").RevokeToken(ctx, "", "world-file"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(recheckEvery)
	_, err = recv(t, sp)
	wantCode(t, err, 401, api.CodeTokenRevoked)
	_, err = recv(t, mp)
	wantCode(t, err, 401, api.CodeTokenRevoked)
}
