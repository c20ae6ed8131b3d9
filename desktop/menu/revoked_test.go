package menu

import (
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// A device removed from RunOS: "Signed out: this device was removed",
// with "Sign in…" (which makes a new key), and nothing opens by itself.
func TestDeviceRemoved(t *testing.T) {
	st := status(4, localapi.SessionRevoked, cluster("ky3", localapi.ClusterDisconnected, true, false))
	st.Session.RevokedAt = now.Add(-10 * time.Minute)
	st.Session.Error = "this device was removed from RunOS at …"
	st.Warnings = []localapi.Warning{{Code: localapi.WarnDeviceRevoked, Message: "this device was removed from RunOS: run `runos vpn up`"}}
	s, ops := run(t, State{AtLogin: true}, StatusEvent{st})
	if len(ops) != 0 {
		t.Fatalf("ops %v", ops)
	}
	m := Build(s, now)
	if m.Status.Title != "Signed out: this device was removed" || m.Toggle.Title != "Sign in…" || m.Toggle.Click != (Op{Kind: OpUp}) || !m.Toggle.Enabled {
		t.Fatalf("menu %+v", m)
	}
	if got := titles(m.Notices); len(got) != 1 || got[0] != "Removed from RunOS at 09:20; signing in makes a new key" {
		t.Fatalf("notices %q", got)
	}
	if m.Icon != IconSignIn || m.Tooltip != "RunOS VPN: signed out, this device was removed" {
		t.Fatalf("icon %v %q", m.Icon, m.Tooltip)
	}
	if row := m.Clusters[0]; row.Click != (Op{Kind: OpUp, CID: "ky3"}) || row.Checked || !row.Enabled {
		t.Fatalf("row %+v", row)
	}
}
