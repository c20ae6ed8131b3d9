package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/localapi/vpnup"
)

// The decision is vpnup's (tested there); the CLI adds how to choose.
func TestChooseHint(t *testing.T) {
	for _, c := range []struct {
		available []string
		want      string
	}{
		{nil, "choose a cluster: your account has no cluster with a VPN you can reach; pass --cid <cid> or set a default with `runos config set cid <cid>`"},
		{[]string{"xym", "ky3"}, "choose a cluster: your account has 2 clusters (ky3, xym); pass --cid <cid> or set a default with `runos config set cid <cid>`"},
	} {
		_, err := vpnup.ChooseCluster("", "", nil, c.available)
		err = chooseHint(err)
		if err == nil || err.Error() != c.want || !errors.Is(err, vpnup.ErrChooseCluster) {
			t.Errorf("%q: %v, want %q", c.available, err, c.want)
		}
	}
	other := errors.New("list your clusters: 503")
	if err := chooseHint(other); err != other {
		t.Errorf("another error changed: %v", err)
	}
}

func TestCheckConnected(t *testing.T) {
	st := &localapi.Status{
		Session: localapi.Session{State: localapi.SessionSignedIn},
		Clusters: []localapi.ClusterStatus{
			{CID: "ky3", State: localapi.ClusterConnected, PeerUp: true},
			{CID: "xym", State: localapi.ClusterConnecting, Server: localapi.Server{NodeID: "n1", Endpoint: "198.51.100.31:32768"}},
		},
	}
	if cs := checkConnected(st, []string{"ky3"}); !cs.done {
		t.Errorf("ky3 up: %+v", cs)
	}
	cs := checkConnected(st, []string{"ky3", "xym"})
	if cs.done || cs.fatal != nil || !strings.Contains(cs.waiting, "xym: connecting, waiting for the handshake with n1 (198.51.100.31:32768)") {
		t.Errorf("xym pending: %+v", cs)
	}
	st.Clusters[1].Error = "join refused"
	if cs := checkConnected(st, []string{"xym"}); cs.reason != "xym: join refused" {
		t.Errorf("reason %+v", cs)
	}
	if cs := checkConnected(st, []string{"abc"}); cs.done || !strings.Contains(cs.waiting, "abc: waiting for the daemon") {
		t.Errorf("unknown cluster: %+v", cs)
	}
	st.Session.State = localapi.SessionExpired
	if cs := checkConnected(st, []string{"ky3"}); cs.fatal == nil {
		t.Error("expired session is not fatal")
	}
}

func TestSessionLinesExpiryWarning(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := localapi.Session{State: localapi.SessionSignedIn, User: "alice@example.com"}
	for _, c := range []struct {
		left time.Duration
		warn string
	}{
		{23*time.Hour + 59*time.Minute, ""},
		{61 * time.Minute, ""},
		{time.Hour, "warning: your sign-in expires in 1h; run `runos vpn up` to renew"},
		{42*time.Minute + 59*time.Second, "warning: your sign-in expires in 42m; run `runos vpn up` to renew"},
		{30 * time.Second, "warning: your sign-in expires in 30s; run `runos vpn up` to renew"},
	} {
		s.ExpiresAt = now.Add(c.left)
		lines := sessionLines(s, "", false, now)
		got := ""
		if len(lines) > 1 {
			got = lines[1]
		}
		if got != c.warn {
			t.Errorf("%s left: lines %q, want warning %q", c.left, lines, c.warn)
		}
	}
	// The daemon's session-expiring code warns too, in this wording, even
	// where this command's clock is a moment behind the daemon's.
	s.ExpiresAt = now.Add(time.Hour + 400*time.Millisecond)
	if l := sessionLines(s, "", true, now); len(l) != 2 || l[1] != "warning: your sign-in expires in 1h; run `runos vpn up` to renew" {
		t.Errorf("the daemon warns: %q", l)
	}
	s.ExpiresAt = now.Add(-time.Second)
	if l := sessionLines(s, "", false, now); !strings.HasPrefix(l[0], "expired at 11:59 UTC; run `runos vpn up` to sign in again") {
		t.Errorf("lapsed by the clock: %q", l)
	}
	if l := sessionLines(localapi.Session{State: localapi.SessionSignedOut}, "", false, now); l[0] != "signed out; run `runos vpn up` to sign in" {
		t.Errorf("signed out: %q", l)
	}
	s.ExpiresAt = now.Add(30 * time.Hour)
	if l := sessionLines(s, "", false, now); !strings.Contains(l[0], "until 2026-12-03 18:00 UTC (30h left)") {
		t.Errorf("tomorrow: %q", l)
	}
}

func TestFmtDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 59 * time.Second: "59s", 90 * time.Second: "1m",
		time.Hour: "1h", 23*time.Hour + 59*time.Minute: "23h59m", 50 * time.Hour: "2d2h",
	} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestIngressRequest(t *testing.T) {
	r, err := ingressRequest(ingressFlags{ip: "10.77.0.21", notPublished: true})
	if err != nil || r.IngressIP != "10.77.0.21" || r.Published == nil || *r.Published {
		t.Errorf("private, withheld: %+v %v", r, err)
	}
	r, err = ingressRequest(ingressFlags{ip: "2001:db8::0001", published: true})
	if err != nil || r.IngressIP != "2001:db8::1" || !*r.Published {
		t.Errorf("v6, published: %+v %v", r, err)
	}
	if r, err := ingressRequest(ingressFlags{published: true}); err != nil || r.IngressIP != "" {
		t.Errorf("publish only: %+v %v", r, err)
	}
	for _, bad := range []string{"10.0.0", "host.example", "10.0.0.1/24", "fe80::1%eth0", " 10.0.0.1"} {
		if _, err := ingressRequest(ingressFlags{ip: bad}); err == nil || !strings.Contains(err.Error(), "not an IP address") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestServiceSteps(t *testing.T) {
	s := &api.VPNService{NodeID: "n1", Port: 32768, State: api.ServiceInstalling}
	if got := serviceSteps(s); len(got) != 1 {
		t.Errorf("installing: %q", got)
	}
	s.PublicKey = "k="
	s.State, s.Endpoint, s.AddressKind = api.ServiceServing, "10.77.0.21:32768", api.AddressPrivate
	got := serviceSteps(s)
	if len(got) != 3 || got[2] != "listening on UDP 32768: devices dial 10.77.0.21:32768 (private)" {
		t.Errorf("serving: %q", got)
	}
}

func TestAccessLines(t *testing.T) {
	for _, tc := range []struct {
		a    *localapi.Access
		want []string
	}{
		{nil, nil}, // a daemon older than the field
		{&localapi.Access{Control: true, Reason: "root and may change the VPN state"}, nil},
		{&localapi.Access{Reason: "uid 1001 may only read", Hint: "ask an administrator to run: sudo runos vpn install --operator bob"},
			[]string{"you may only read the VPN status; to change it, ask an administrator to run: sudo runos vpn install --operator bob"}},
		{&localapi.Access{Reason: "the caller's identity is unknown"},
			[]string{"you may only read the VPN status; to change it, ask an administrator to run: sudo runos vpn install --operator $USER"}},
	} {
		if got := accessLines(tc.a); !slices.Equal(got, tc.want) {
			t.Errorf("accessLines(%+v) = %q, want %q", tc.a, got, tc.want)
		}
	}
}

func TestMergeWarnings(t *testing.T) {
	got := mergeWarnings([]string{"a", "b"}, nil, []string{"b", "c"})
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("%q", got)
	}
	if got := mergeWarnings(nil); got == nil || len(got) != 0 {
		t.Errorf("empty must be [] for JSON: %#v", got)
	}
}

func TestOtherWarnings(t *testing.T) {
	st := &localapi.Status{
		Session: localapi.Session{State: localapi.SessionSignedIn},
		DNS:     localapi.DNS{Error: "resolv.conf keeps being rewritten"},
		Warnings: []localapi.Warning{
			{Code: localapi.WarnSessionExpiring, Message: "the session ends at 2026-12-02 12:42 UTC, in less than an hour: run `runos vpn up` to sign in again"},
			{Code: localapi.WarnDNS, Message: "dns: resolv.conf keeps being rewritten"},
			{Code: "tunnel-restarted", Message: "the tunnel restarted"}, // a code this runos does not know
			{Message: "a warning from an older daemon"},                 // a bare string, no code
		},
	}
	if got := otherWarnings(st); !slices.Equal(got, []string{"the tunnel restarted", "a warning from an older daemon"}) {
		t.Errorf("otherWarnings = %q", got)
	}
	// By code, not by wording: reworded messages are still placed.
	st.Warnings = []localapi.Warning{{Code: localapi.WarnSessionExpired, Message: "Sitzung abgelaufen"}, {Code: localapi.WarnDNS, Message: "DNS kaputt"}}
	st.Session.State = localapi.SessionExpired
	if got := otherWarnings(st); len(got) != 0 {
		t.Errorf("otherWarnings = %q", got)
	}
	// Signed out, or no DNS error to show: the warning is the only place.
	st.Session.State, st.DNS.Error = localapi.SessionSignedOut, ""
	if got := otherWarnings(st); !slices.Equal(got, []string{"Sitzung abgelaufen", "DNS kaputt"}) {
		t.Errorf("otherWarnings = %q", got)
	}
}
