package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// A device removed from RunOS: status says revoked, when, and what to
// run; connecting refuses with the same next step.
func TestStatusRevoked(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	st := &localapi.Status{
		Session: localapi.Session{State: localapi.SessionRevoked, User: "alice@example.com", RevokedAt: now.Add(-3 * time.Minute),
			Error: "this device was removed from RunOS at 2026-12-02T11:57:00Z: its session ended and its key is refused"},
		Tunnel:   localapi.Tunnel{Interface: "wg1", Up: true},
		DNS:      localapi.DNS{Mode: "resolv.conf"},
		Clusters: []localapi.ClusterStatus{{CID: "ky3", State: localapi.ClusterDisconnected, Wanted: true}},
		Warnings: []localapi.Warning{{Code: localapi.WarnDeviceRevoked, Message: "this device was removed from RunOS at …"}},
	}
	var b bytes.Buffer
	renderStatus(&b, st, now, nil)
	out := b.String()
	for _, want := range []string{
		"Session   revoked at 11:57 UTC: this device was removed from RunOS and its key is refused\n",
		"          run `runos vpn up` to sign in again with a fresh key (your clusters reconnect)\n",
		"ky3  disconnected",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "removed from RunOS") != 1 {
		t.Errorf("said more than once:\n%s", out)
	}
	if cs := checkConnected(st, []string{"ky3"}); cs.fatal == nil || !strings.Contains(cs.fatal.Error(), "runos vpn up") {
		t.Errorf("connecting while revoked: %+v", cs)
	}
	if err := needSession(st.Session, now); err == nil || err.Error() != "this device was removed from RunOS at 11:57 UTC: run `runos vpn up` to sign in again with a fresh key" {
		t.Errorf("needSession: %v", err)
	}
}
