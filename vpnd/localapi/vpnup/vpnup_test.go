package vpnup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

func TestChooseCluster(t *testing.T) {
	cases := []struct {
		name                string
		cid, config         string
		restored, available []string
		want, err           string
	}{
		{"the user's choice wins", "xym", "ky3", []string{"ky3"}, []string{"ky3", "xym"}, "xym", ""},
		{"config next", "", "ky3", nil, []string{"ky3", "xym"}, "ky3", ""},
		{"restored needs no default", "", "", []string{"xym"}, []string{"ky3", "xym"}, "", ""},
		{"only cluster", "", "", nil, []string{"ky3"}, "ky3", ""},
		{"none", "", "", nil, nil, "", "choose a cluster: your account has no cluster with a VPN you can reach"},
		{"several", "", "", nil, []string{"xym", "ky3"}, "", "choose a cluster: your account has 2 clusters (ky3, xym)"},
	}
	for _, c := range cases {
		got, err := ChooseCluster(c.cid, c.config, c.restored, c.available)
		if c.err != "" {
			var ce *ChooseError
			if err == nil || err.Error() != c.err || !errors.Is(err, ErrChooseCluster) || !errors.As(err, &ce) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestSignInReason(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	in := localapi.Session{State: localapi.SessionSignedIn, APIURL: "https://c", ExpiresAt: now.Add(time.Hour)}
	cases := []struct {
		s      localapi.Session
		apiURL string
		want   string
	}{
		{in, "https://c", ""},
		{in, "", ""},
		{localapi.Session{State: localapi.SessionSignedOut}, "", "not signed in"},
		{localapi.Session{State: localapi.SessionExpired}, "", "expired"},
		{localapi.Session{State: localapi.SessionSignedIn, ExpiresAt: now}, "", "expired"}, // the clock says so before the daemon does
		{in, "https://other", "signed in to https://c, not https://other"},
		{localapi.Session{State: localapi.SessionSignedIn, APIURL: "https://c/", ExpiresAt: now.Add(time.Hour)}, "https://c", ""},
		{localapi.Session{State: localapi.SessionExpired, APIURL: "https://c/"}, "", "signing in again to https://c"},
		{localapi.Session{State: localapi.SessionRevoked, APIURL: "https://c"}, "", "this device was removed from RunOS; signing in again with a fresh key to https://c"},
	}
	for _, c := range cases {
		got := SignInReason(c.s, c.apiURL, now)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("SignInReason(%+v, %q) = %q, want %q", c.s, c.apiURL, got, c.want)
		}
	}
}

// control is a Lister that counts its calls.
type control struct {
	clusters []api.Cluster
	err      error
	calls    int
}

func (c *control) Clusters(context.Context) ([]api.Cluster, error) {
	c.calls++
	return c.clusters, c.err
}

func wg(cid string) api.Cluster { return api.Cluster{CID: cid, UserVPN: api.UserVPNWireGuard} }

func status(cs ...localapi.ClusterStatus) *localapi.Status {
	return &localapi.Status{Session: localapi.Session{State: localapi.SessionSignedIn}, Clusters: cs}
}

func TestDecide(t *testing.T) {
	ctx := context.Background()
	ky3, xym := localapi.ClusterStatus{CID: "ky3"}, localapi.ClusterStatus{CID: "xym"}
	wanted := func(c localapi.ClusterStatus) localapi.ClusterStatus { c.Wanted = true; return c }
	netbird := api.Cluster{CID: "nb1", UserVPN: api.UserVPNNetBird}
	cases := []struct {
		name        string
		cid, config string
		st          *localapi.Status
		fresh       *control // nil: no sign-in happened
		want        Plan
		err         string
		asked       bool // control was asked for the account's clusters
	}{
		// A fresh sign-in: the daemon forgot its list; control has it.
		{name: "fresh sign-in, one cluster with a VPN", st: status(), fresh: &control{clusters: []api.Cluster{wg("ky3"), netbird}},
			want: Plan{Connect: "ky3"}, asked: true},
		{name: "fresh sign-in, several", st: status(), fresh: &control{clusters: []api.Cluster{wg("xym"), wg("ky3")}},
			err: "choose a cluster: your account has 2 clusters (ky3, xym)", asked: true},
		{name: "fresh sign-in, none", st: status(), fresh: &control{clusters: []api.Cluster{netbird}},
			err: "no cluster with a VPN", asked: true},
		{name: "fresh sign-in, control fails", st: status(), fresh: &control{err: errors.New("503")},
			err: "list your clusters: 503", asked: true},
		// The same user again: the daemon restores what they had.
		{name: "restored, several", st: status(wanted(ky3), wanted(xym)), fresh: &control{clusters: []api.Cluster{wg("ky3"), wg("xym")}},
			want: Plan{Restored: []string{"ky3", "xym"}}},
		{name: "restored, the choice among them", cid: "xym", st: status(wanted(ky3), wanted(xym)), fresh: &control{},
			want: Plan{Restored: []string{"ky3", "xym"}}},
		{name: "restored, the configured one besides", config: "abc", st: status(wanted(ky3)), fresh: &control{},
			want: Plan{Restored: []string{"ky3"}, Connect: "abc"}},
		// No sign-in: the daemon's list serves.
		{name: "valid session, the daemon's only cluster", st: status(ky3), want: Plan{Connect: "ky3"}},
		{name: "valid session, several", st: status(ky3, xym), err: "2 clusters (ky3, xym)"},
		{name: "the user's choice", cid: "xym", st: status(ky3, xym), fresh: &control{}, want: Plan{Connect: "xym"}},
		{name: "the configured cid", config: "ky3", st: status(), fresh: &control{}, want: Plan{Connect: "ky3"}},
	}
	for _, c := range cases {
		var fresh Lister
		if c.fresh != nil {
			fresh = c.fresh
		}
		got, err := Decide(ctx, c.cid, c.config, c.st, fresh)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want %q", c.name, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: err %v", c.name, err)
		case c.err == "" && (got.Connect != c.want.Connect || !slices.Equal(got.Restored, c.want.Restored)):
			t.Errorf("%s: plan %+v, want %+v", c.name, got, c.want)
		}
		if c.fresh != nil && (c.fresh.calls > 0) != c.asked {
			t.Errorf("%s: control asked %d times, want asked=%v", c.name, c.fresh.calls, c.asked)
		}
	}
}

func TestRestored(t *testing.T) {
	st := status(localapi.ClusterStatus{CID: "ky3", Wanted: true}, localapi.ClusterStatus{CID: "xym"}, localapi.ClusterStatus{CID: "abc", Wanted: true})
	if got := Restored(st); !slices.Equal(got, []string{"ky3", "abc"}) {
		t.Errorf("Restored = %q", got)
	}
}
