package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// Status says per cluster what is routed, what is shadowed and by what,
// and the mapped range.
func TestStatusReach(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	st := &localapi.Status{
		Session: localapi.Session{State: localapi.SessionSignedIn, User: "alice@example.com", ExpiresAt: now.Add(time.Hour * 5)},
		Tunnel:  localapi.Tunnel{Interface: "wg1", Up: true},
		DNS:     localapi.DNS{Mode: "resolv.conf"},
		Clusters: []localapi.ClusterStatus{
			{CID: "ky3", State: localapi.ClusterConnected, Wanted: true, Reach: &localapi.ClusterReach{Default: true,
				Routed: []string{"10.10.0.0/24", "10.96.0.0/12"}, Mapped: "fd52:4f53:5600:2::/96"}},
			{CID: "xym", State: localapi.ClusterConnected, Wanted: true, Reach: &localapi.ClusterReach{
				Shadowed: []localapi.ShadowedRange{{Prefix: "10.10.0.0/24", By: "ky3"}, {Prefix: "10.96.0.0/12", By: "ky3"}}, Mapped: "fd52:4f53:5600:3::/96"}},
		},
	}
	var b bytes.Buffer
	renderStatus(&b, st, now, nil)
	for _, want := range []string{
		"  ky3: routes 10.10.0.0/24, 10.96.0.0/12 (the default cluster)\n",
		"  ky3: mapped fd52:4f53:5600:2::/96: every internal range, by the cluster's names\n",
		"  xym: shadowed 10.10.0.0/24 (by ky3), 10.96.0.0/12 (by ky3)\n",
		"  xym: mapped fd52:4f53:5600:3::/96",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}
