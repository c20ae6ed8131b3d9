package state

import (
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// A revoked device wants nothing on the tunnel or DNS, says so with when
// and what to run, and keeps what the user wanted for the next sign-in.
func TestDeriveRevoked(t *testing.T) {
	p := signedInPrefs("ky3", "xym")
	p.AccessToken, p.ExpiresAt, p.DeviceID = "", time.Time{}, ""
	p.RevokedAt, p.RevokedWhy = t0.Add(-time.Minute), "this device was removed from RunOS at …"
	in := &Inputs{Now: t0, Prefs: p, Map: dmap(ky3n1, xym), Device: device()}
	if in.SignedIn() {
		t.Fatal("a revoked device counts as signed in")
	}
	if plan := Want(in); len(plan.Tunnel.Peers) != 0 || len(plan.Tunnel.Addresses) != 0 || len(plan.DNS) != 0 {
		t.Errorf("plan = %+v", plan)
	}
	st := Derive(in)
	s := st.Session
	if s.State != localapi.SessionRevoked || !s.RevokedAt.Equal(t0.Add(-time.Minute)) || s.Error != p.RevokedWhy ||
		s.User != "alice@example.com" || s.APIURL == "" || !s.ExpiresAt.IsZero() || s.DeviceID != "" {
		t.Errorf("session = %+v", s)
	}
	if len(st.Warnings) != 1 || st.Warnings[0].Code != localapi.WarnDeviceRevoked ||
		!strings.Contains(st.Warnings[0].Message, "removed from RunOS at 2026-07-01 11:59 UTC: run `runos vpn up`") {
		t.Errorf("warnings = %+v", st.Warnings)
	}
	for _, c := range st.Clusters {
		if c.State != localapi.ClusterDisconnected || c.PeerUp || !c.Wanted {
			t.Errorf("cluster = %+v", c)
		}
	}
	if !NextChange(in).IsZero() {
		t.Error("time alone changes a revoked state")
	}
	// Revoked outranks a token still in the prefs and an expiry.
	in.Prefs.AccessToken, in.SessionEnded = "left-over", true
	if Derive(in).Session.State != localapi.SessionRevoked {
		t.Error("revoked did not outrank the rest")
	}
}
