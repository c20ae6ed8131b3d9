package cli

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

func TestVPNUpSignsInAndConnectsConfiguredCluster(t *testing.T) {
	h := newHarness(t)
	h.run("config", "set", "cid", "ky3").want(t, 0, nil, nil)
	r := h.run("vpn", "up")
	r.want(t, 0, []string{"ky3 is up: VPN server n1 at 10.77.0.21:32768 (100.100.1.1)", "Connected in"},
		[]string{"Not signed in; signing in to " + h.control.URL() + ".", "Opening " + h.control.URL() + "/oauth/authorize", "Signed in as alice@example.com until"})
	if len(h.signIns) != 1 || h.signIns[0].clientID != api.ClientCLI || h.signIns[0].issuer != h.control.URL() || !h.signIns[0].hadOpener {
		t.Errorf("sign-ins %+v", h.signIns)
	}
	want := []string{"session alice@example.com " + h.control.URL(), "connect ky3"}
	if got := h.daemon.Calls(); !slices.Equal(got, want) {
		t.Errorf("daemon calls %q, want %q", got, want)
	}
	// Signed in and connected: up again signs in no more and connects nothing.
	h.run("vpn", "up").want(t, 0, []string{"ky3 is up"}, nil)
	if len(h.signIns) != 1 || len(h.daemon.Calls()) != 2 {
		t.Errorf("second up signed in or connected again: %d sign-ins, calls %q", len(h.signIns), h.daemon.Calls())
	}
}

func TestVPNUpNoBrowserUsesDeviceCode(t *testing.T) {
	h := newHarness(t)
	r := h.run("vpn", "up", "--no-browser", "--cid", "xym")
	r.want(t, 0, []string{"xym is up"}, []string{"enter the code WDJB-MJHT", "Waiting for the sign-in to finish…"})
	if len(h.signIns) != 1 || !h.signIns[0].noBrowser || h.signIns[0].hadOpener {
		t.Errorf("sign-ins %+v, want one without a browser", h.signIns)
	}
}

func TestVPNUpPicksTheOnlyCluster(t *testing.T) {
	h := newHarness(t)
	h.control.clusters = h.control.clusters[:1] // the account has only ky3
	h.run("vpn", "up").want(t, 0, []string{"ky3 is up"}, nil)
	if !slices.Contains(h.control.Requests(), "GET /v1/clusters") {
		t.Errorf("up did not list the account's clusters: %q", h.control.Requests())
	}
}

func TestVPNUpSeveralClustersSaysHowToChoose(t *testing.T) {
	h := newHarness(t)
	r := h.run("vpn", "up")
	r.want(t, 1, nil, []string{"your account has 2 clusters (ky3, xym)", "--cid <cid>", "runos config set cid <cid>"})
	if slices.Contains(h.daemon.Calls(), "connect ky3") || slices.Contains(h.daemon.Calls(), "connect xym") {
		t.Errorf("connected without a choice: %q", h.daemon.Calls())
	}
}

// On a terminal, several clusters and no default: up asks, connects the
// choice, and remembers it when the user agrees.
func TestVPNUpPicksOnATerminal(t *testing.T) {
	for _, tc := range []struct {
		typed, cid string
		remember   bool
	}{{"2\nn\n", "xym", false}, {"9\nky3\ny\n", "ky3", true}} {
		h := newHarness(t)
		h.tty = bytes.NewBufferString(tc.typed)
		r := h.run("vpn", "up")
		r.want(t, 0, []string{tc.cid + " is up"}, []string{"Your account has 2 clusters and no default:", "  1) ky3", "  2) xym", "Connect which one? [1-2]", "Make " + tc.cid + " your default (runos config set cid " + tc.cid + ")? [y/N]"})
		if !slices.Contains(h.daemon.Calls(), "connect "+tc.cid) {
			t.Errorf("typed %q: calls %q", tc.typed, h.daemon.Calls())
		}
		saved := h.run("config", "get", "cid").stdout
		if got := strings.TrimSpace(saved) == tc.cid; got != tc.remember {
			t.Errorf("typed %q: config cid %q", tc.typed, saved)
		}
	}
	// Nothing chosen: the same advice as without a terminal.
	h := newHarness(t)
	h.tty = bytes.NewBufferString("x\n")
	h.run("vpn", "up").want(t, 2, nil, []string{"no cluster chosen", "--cid <cid>"})
}

func TestVPNUpWaitsForRestoredClusters(t *testing.T) {
	h := newHarness(t)
	h.daemon.Set(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionExpired, User: "alice@example.com", APIURL: h.control.URL(), ExpiresAt: h.now.Add(-time.Minute)}
	})
	h.daemon.restoreOnSet = []string{"ky3", "xym"}
	r := h.run("vpn", "up")
	r.want(t, 0, []string{"ky3 is up", "xym is up"}, []string{"Your sign-in expired; signing in again to " + h.control.URL() + ".", "Reconnecting ky3, xym."})
	for _, c := range h.daemon.Calls() {
		if strings.HasPrefix(c, "connect") {
			t.Errorf("up connected %q itself; the daemon had restored it", c)
		}
	}
}

func TestVPNUpTimeoutUndoesTheConnect(t *testing.T) {
	h := newHarness(t)
	h.daemon.noHandshake["ky3"] = true
	r := h.run("vpn", "up", "--cid", "ky3", "--timeout", "300ms")
	r.want(t, 1, nil, []string{
		"no handshake with ky3 within 300ms: no answer from the VPN server on n1 at 10.77.0.21:32768: check that UDP 32768 is reachable",
		"Disconnected ky3 again",
	})
	if got := h.daemon.Calls(); got[len(got)-1] != "disconnect ky3" {
		t.Errorf("daemon calls %q, want the connect undone", got)
	}
	st, _ := h.daemon.snapshot()
	if len(st.Clusters) != 0 {
		t.Errorf("clusters left behind: %+v", st.Clusters)
	}
}

func TestVPNUpTimeoutGivesTheDaemonsReason(t *testing.T) {
	h := newHarness(t)
	h.daemon.noHandshake["ky3"] = true
	h.daemon.clusterErr["ky3"] = "control unreachable: dial tcp 198.51.100.10:443: connect: no route to host"
	h.run("vpn", "up", "--cid", "ky3", "--timeout", "200ms").want(t, 1, nil,
		[]string{"within 200ms: ky3: control unreachable: dial tcp"})
}

func TestVPNUpRefusalFromDaemonChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.daemon.connectErr["ky3"] = &api.Error{Status: 409, Code: localapi.CodeControl, Message: "cluster ky3 has no VPN server", Hint: "an operator adds one with runos services wireguard add"}
	h.run("vpn", "up", "--cid", "ky3").want(t, 1, nil,
		[]string{"vpn up: connect ky3: cluster ky3 has no VPN server (an operator adds one with runos services wireguard add)"})
}

func TestVPNUpWithoutAPIURL(t *testing.T) {
	h := newHarness(t)
	delete(h.env, "RUNOS_API_URL")
	h.run("vpn", "up", "--cid", "ky3").want(t, 1, nil, []string{"no control URL configured: run `runos config set api-url https://<control>`"})
	if len(h.signIns) != 0 {
		t.Error("signed in without a control URL")
	}
}

func TestBadCIDSendsNothing(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{
		{"vpn", "up", "--cid", "KY3"},
		{"vpn", "connect", "ky"},
		{"vpn", "disconnect", "ky3!"},
		{"clusters", "show", "averyveryverylongcid"},
		{"nodes", "list", "--cid", "k y"},
	} {
		h.run(args...).want(t, 2, nil, []string{"a cid is 3 to 16 lowercase letters and digits"})
	}
	if c := h.daemon.Calls(); len(c) != 0 {
		t.Errorf("daemon saw %q", c)
	}
	if r := h.control.Requests(); len(r) != 0 {
		t.Errorf("control saw %q", r)
	}
}

func TestVPNConnectSignedOutSaysRunUp(t *testing.T) {
	h := newHarness(t)
	h.run("vpn", "connect", "xym").want(t, 1, nil, []string{"connect xym: not signed in: run `runos vpn up` first"})
	h.daemon.Set(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionExpired, ExpiresAt: h.now.Add(-time.Hour)}
	})
	h.run("vpn", "connect", "xym").want(t, 1, nil, []string{"your sign-in expired at 11:00 UTC: run `runos vpn up` to sign in again"})
	if c := h.daemon.Calls(); len(c) != 0 {
		t.Errorf("daemon saw %q", c)
	}
}

func signedIn(h *harness) {
	h.daemon.Set(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedIn, User: "alice@example.com", APIURL: h.control.URL(), ExpiresAt: h.now.Add(20 * time.Hour)}
		st.Tunnel.Up = true
		st.Tunnel.Addresses = []string{"100.96.0.2/32"}
	})
}

func TestVPNConnectDisconnectDown(t *testing.T) {
	h := newHarness(t)
	signedIn(h)
	h.run("vpn", "connect", "xym").want(t, 0, []string{"xym is up"}, nil)
	r := h.run("vpn", "connect", "ky3", "--json")
	r.want(t, 0, nil, nil)
	var st localapi.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("connect --json: %v", err)
	}
	if len(st.Clusters) != 2 || !st.Clusters[1].PeerUp {
		t.Errorf("after connect: %+v", st.Clusters)
	}
	h.run("vpn", "disconnect", "xym").want(t, 0, []string{"Disconnected xym."}, nil)
	h.run("vpn", "disconnect", "xym").want(t, 1, nil, []string{"disconnect xym: xym is not connected"})
	h.run("vpn", "down").want(t, 0, []string{"Disconnected every cluster and ended the session."}, nil)
	want := []string{"connect xym", "connect ky3", "disconnect xym", "disconnect xym", "end session"}
	if got := h.daemon.Calls(); !slices.Equal(got, want) {
		t.Errorf("daemon calls %q, want %q", got, want)
	}
}

func TestVPNConnectTimeoutLeavesDaemonAsItWas(t *testing.T) {
	h := newHarness(t)
	signedIn(h)
	h.daemon.noHandshake["xym"] = true
	h.run("vpn", "connect", "xym", "--timeout", "200ms").want(t, 1, nil, []string{"connect xym: no handshake with xym within 200ms", "Disconnected xym again"})
	st, _ := h.daemon.snapshot()
	if len(st.Clusters) != 0 {
		t.Errorf("clusters left: %+v", st.Clusters)
	}
}

func TestNoDaemonSaysHowToStartIt(t *testing.T) {
	h := newHarness(t)
	h.env["RUNOS_VPND_SOCKET"] = h.dir + "/none.sock"
	for _, args := range [][]string{{"vpn", "status"}, {"vpn", "up"}, {"vpn", "connect", "ky3"}, {"vpn", "down"}} {
		h.run(args...).want(t, 1, nil, []string{"the RunOS VPN daemon is not running", "sudo runos vpn install"})
	}
	// --socket overrides the environment.
	h.run("vpn", "status", "--socket", h.daemon.socket).want(t, 0, []string{"signed out"}, nil)
}

func TestVPNStatus(t *testing.T) {
	h := newHarness(t)
	h.daemon.Set(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedIn, User: "alice@example.com", APIURL: "https://198.51.100.10", ExpiresAt: h.now.Add(42*time.Minute + 30*time.Second)}
		st.Tunnel = localapi.Tunnel{Interface: "wg1", Up: true, Addresses: []string{"100.96.0.2/32"}}
		st.DNS = localapi.DNS{Mode: "resolv.conf", Reason: "no systemd-resolved"}
		st.Clusters = []localapi.ClusterStatus{
			{CID: "ky3", State: localapi.ClusterConnected, Wanted: true, PeerUp: true, LastHandshake: h.now.Add(-12 * time.Second),
				Path: localapi.PathRelay, PathReason: "a handshake initiation got no answer over UDP for 2.5s", Relay: "https://10.77.0.21/runos-vpn/relay",
				Server: localapi.Server{NodeID: "n1", Endpoint: "10.77.0.21:32768", PublicKey: "k=", Address: "100.100.1.1"},
				DNS:    localapi.ClusterDNS{Server: "100.100.1.1", Domains: []string{"ky3.rjwrn.example.com", "apps.example.org"}}},
			{CID: "xym", State: localapi.ClusterError, Wanted: true, Error: "no handshake for 3m"},
		}
	})
	r := h.run("vpn", "status")
	r.want(t, 0, []string{
		"Session   signed in to https://198.51.100.10 as alice@example.com until 12:42 UTC (42m left)", // an older daemon: no control
	}, nil)
	h.daemon.Set(func(st *localapi.Status) { st.Control = "https://198.51.100.10" })
	r = h.run("vpn", "status")
	r.want(t, 0, []string{
		"Control   https://198.51.100.10\nSession   signed in as alice@example.com until 12:42 UTC (42m left)",
		"warning: your sign-in expires in 42m; run `runos vpn up` to renew",
		"Tunnel    wg1 up, 100.96.0.2/32",
		"DNS       resolv.conf (no systemd-resolved)",
		"CID  STATE      PEERUP  PATH   HANDSHAKE  NODE  ENDPOINT",
		"ky3  connected  true    relay  12s ago    n1    10.77.0.21:32768",
		"xym  error      false   -      never      -     -",
		"  ky3: relayed over https://10.77.0.21/runos-vpn/relay (a handshake initiation got no answer over UDP for 2.5s)",
		"  ky3: DNS 100.100.1.1 for ky3.rjwrn.example.com, apps.example.org",
		"  xym: no handshake for 3m",
	}, nil)

	// --json is the daemon's document as is.
	r = h.run("vpn", "status", "--json")
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	sess := got["session"].(map[string]any)
	cl := got["clusters"].([]any)[0].(map[string]any)
	if sess["state"] != "signed-in" || got["tunnel"].(map[string]any)["interface"] != "wg1" ||
		cl["peerUp"] != true || cl["path"] != "relay" || cl["server"].(map[string]any)["address"] != "100.100.1.1" || got["dns"].(map[string]any)["mode"] != "resolv.conf" ||
		cl["dns"].(map[string]any)["server"] != "100.100.1.1" || len(cl["dns"].(map[string]any)["domains"].([]any)) != 2 {
		t.Errorf("status JSON %s", r.stdout)
	}
}

func TestVPNStatusWarningsByCode(t *testing.T) {
	h := newHarness(t)
	h.daemon.Set(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedIn, User: "alice@example.com", ExpiresAt: h.now.Add(42*time.Minute + 30*time.Second)}
		st.DNS = localapi.DNS{Mode: "resolv.conf", Error: "resolv.conf: read-only file system"}
		st.Warnings = []localapi.Warning{
			{Code: localapi.WarnSessionExpiring, Message: "the session ends at 12:42 UTC, in less than an hour: run `runos vpn up` to sign in again"},
			{Code: localapi.WarnDNS, Message: "dns: resolv.conf: read-only file system"},
			{Code: "from-a-newer-daemon", Message: "something this runos has no words for"},
		}
	})
	r := h.run("vpn", "status")
	r.want(t, 0, []string{
		"warning: your sign-in expires in 42m; run `runos vpn up` to renew",
		"DNS       resolv.conf",
		"          error: resolv.conf: read-only file system",
		"warning: something this runos has no words for",
	}, nil)
	if strings.Contains(r.stdout, "the session ends") || strings.Count(r.stdout, "read-only file system") != 1 {
		t.Errorf("a warning said twice:\n%s", r.stdout)
	}
	// --json keeps the typed warnings as the daemon sent them.
	r = h.run("vpn", "status", "--json")
	var got localapi.Status
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Warnings) != 3 || got.Warnings[1] != (localapi.Warning{Code: "dns", Message: "dns: resolv.conf: read-only file system"}) ||
		!strings.Contains(r.stdout, `"code": "session-expiring"`) {
		t.Errorf("status JSON warnings %+v (%v):\n%s", got.Warnings, err, r.stdout)
	}
}

// readOnlyAccess is what the daemon says to a user who may only read.
var readOnlyAccess = &localapi.Access{
	Reason: "bob (uid 1001) may only read the VPN status: changing it is for root, the operator recorded at install and members of the runos group",
	Hint:   "ask an administrator to run: sudo runos vpn install --operator bob",
}

func TestVPNStatusReadOnlyUser(t *testing.T) {
	h := newHarness(t)
	h.daemon.Set(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedIn, User: "alice@example.com", ExpiresAt: h.now.Add(5 * time.Hour)}
		st.Access = readOnlyAccess
	})
	r := h.run("vpn", "status")
	r.want(t, 0, []string{
		"Session   signed in as alice@example.com until",
		"Access    you may only read the VPN status; to change it, ask an administrator to run: sudo runos vpn install --operator bob",
		"Tunnel    wg1 down",
	}, nil)
	if n := strings.Count(r.stdout, "may only read"); n != 1 {
		t.Errorf("said %d times:\n%s", n, r.stdout)
	}
	// --json carries the field as the daemon gave it.
	r = h.run("vpn", "status", "--json")
	var got struct {
		Access *localapi.Access `json:"access"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Access == nil || *got.Access != *readOnlyAccess {
		t.Errorf("status JSON access %+v (%v):\n%s", got.Access, err, r.stdout)
	}
	// A user who may steer, and a daemon that does not say, get no line.
	for _, a := range []*localapi.Access{{Control: true, Reason: "root and may change the VPN state"}, nil} {
		h.daemon.Set(func(st *localapi.Status) { st.Access = a })
		if r := h.run("vpn", "status"); strings.Contains(r.stdout, "Access") || strings.Contains(r.stdout, "may only read") {
			t.Errorf("access %+v: line shown:\n%s", a, r.stdout)
		}
	}
}

func TestVPNUpReadOnlyUserStopsBeforeSignIn(t *testing.T) {
	h := newHarness(t)
	h.daemon.Set(func(st *localapi.Status) { st.Access = readOnlyAccess })
	h.run("config", "set", "cid", "ky3").want(t, 0, nil, nil)
	h.run("vpn", "up").want(t, 1, nil, []string{"vpn up: bob (uid 1001) may only read the VPN status",
		"(ask an administrator to run: sudo runos vpn install --operator bob)"})
	if len(h.signIns) != 0 || len(h.daemon.Calls()) != 0 {
		t.Errorf("a read-only user was signed in (%d) or the daemon asked: %q", len(h.signIns), h.daemon.Calls())
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	h := newHarness(t)
	cases := map[string][]string{
		"unknown flag: --nope":       {"vpn", "up", "--nope"},
		"missing CID":                {"vpn", "connect"},
		"too many arguments":         {"vpn", "connect", "ky3", "xym"},
		`unknown command "sttaus"`:   {"vpn", "sttaus"},
		`unknown command "bogus"`:    {"bogus"},
		"--timeout must be positive": {"vpn", "up", "--timeout", "0s"},
		"target-node-id":             {"services", "wireguard", "move", "wg1", "--cid", "ky3"},
		"if any flags in the group":  {"nodes", "ingress", "n1", "--cid", "ky3", "--ingress-published", "--ingress-not-published"},
		"at least one of the flags":  {"nodes", "ingress", "n1", "--cid", "ky3"},
		"--log-level":                {"vpnd", "--log-level", "loud"},
	}
	for want, args := range cases {
		h.run(args...).want(t, 2, nil, []string{want, "--help' for usage."})
	}
	h.run("vpn", "sttaus").want(t, 2, nil, []string{"did you mean status?"})
}

func TestHelpExplainsWithExamples(t *testing.T) {
	h := newHarness(t)
	h.run("vpn", "up", "--help").want(t, 0, []string{"Examples:", "runos vpn up --no-browser", "--timeout"}, nil)
	h.run("vpn").want(t, 0, []string{"Available Commands:", "connect", "status"}, nil)
	h.run().want(t, 0, []string{"runos vpn up", "runos config set cid ky3"}, nil)
}

func TestVPNUpRealBrowserSignIn(t *testing.T) {
	h := newHarness(t)
	h.realSignIn(t)
	r := h.run("vpn", "up", "--cid", "ky3")
	r.want(t, 0, []string{"ky3 is up"}, []string{"If it does not open, visit: " + h.control.URL() + "/oauth/authorize?", "Signed in as alice@example.com"})
	calls := h.daemon.Calls()
	if len(calls) < 1 || calls[0] != "session alice@example.com "+h.control.URL() {
		t.Errorf("daemon calls %q", calls)
	}
}

func TestLoginRealDeviceSignIn(t *testing.T) {
	h := newHarness(t)
	h.realSignIn(t)
	r := h.run("login", "--no-browser")
	r.want(t, 0, []string{"Logged in to " + h.control.URL() + " as alice@example.com"},
		[]string{"To sign in, visit " + h.control.URL() + "/oauth/device and enter the code WDJB-MJHT"})
	if slices.Contains(h.control.Requests(), "GET /oauth/authorize") {
		t.Error("--no-browser opened the browser")
	}
	h.run("clusters", "list").want(t, 0, []string{"ky3  tc3-ky3  true"}, nil)
}

// TestDaemonStoppingMidCall: a daemon that goes away while handling a
// change is said so in the product's words, never as a raw transport error.
func TestDaemonStoppingMidCall(t *testing.T) {
	h := newHarness(t)
	h.run("vpn", "up", "--cid", "ky3").want(t, 0, []string{"ky3 is up"}, nil)
	for _, tc := range []struct {
		call string
		args []string
		msg  string
	}{
		{"disconnect", []string{"vpn", "disconnect", "ky3"}, "the RunOS VPN daemon stopped while disconnecting ky3; it may have taken effect: check `runos vpn status`"},
		{"connect", []string{"vpn", "connect", "xym"}, "the RunOS VPN daemon stopped while connecting xym; it may have taken effect: check `runos vpn status`"},
		{"end", []string{"vpn", "down"}, "the RunOS VPN daemon stopped while disconnecting every cluster and ending the session; it may have taken effect: check `runos vpn status`"},
	} {
		h.daemon.mu.Lock()
		h.daemon.dieOn = map[string]bool{tc.call: true}
		h.daemon.mu.Unlock()
		r := h.run(tc.args...)
		r.want(t, 1, nil, []string{tc.msg})
		for _, raw := range []string{"local.runos", "connection reset", "EOF"} {
			if strings.Contains(r.stderr, raw) {
				t.Errorf("%s: the raw transport error shows: %s", tc.call, r.stderr)
			}
		}
	}
}

// TestDownAndDisconnectSayWhatIsPending: when control did not hear it, the
// commands say it is done here and pending at control.
func TestDownAndDisconnectSayWhatIsPending(t *testing.T) {
	h := newHarness(t)
	h.run("vpn", "up", "--cid", "ky3").want(t, 0, []string{"ky3 is up"}, nil)
	const leave = "leaving ky3 pending at control: control https://x unreachable: connection refused; the daemon retries until control answers"
	h.daemon.mu.Lock()
	h.daemon.afterDisconnect = func(st *localapi.Status) {
		st.Clusters = append(st.Clusters, localapi.ClusterStatus{CID: "ky3", State: localapi.ClusterDisconnected, Error: leave})
		st.Warnings = append(st.Warnings, localapi.Warning{Code: localapi.WarnLeavePending, Message: leave})
	}
	h.daemon.mu.Unlock()
	h.run("vpn", "disconnect", "ky3").want(t, 0, []string{"Disconnected ky3 here; " + leave + "."}, nil)
	const signOut = "sign-out pending at control: control https://x unreachable: connection refused; the daemon retries until control answers"
	h.daemon.mu.Lock()
	h.daemon.afterEnd = func(st *localapi.Status) {
		st.Warnings = []localapi.Warning{{Code: localapi.WarnSignOutPending, Message: signOut}}
	}
	h.daemon.mu.Unlock()
	h.run("vpn", "down").want(t, 0, []string{"Disconnected every cluster and signed out here; " + signOut + "."}, nil)
	h.run("vpn", "status").want(t, 0, []string{"warning: " + signOut}, nil)
}

// Every command that steers the daemon says first that this user may only
// read, and why, whatever else is wrong (here: signed out too).
func TestSteeringCommandsCheckAccessFirst(t *testing.T) {
	h := newHarness(t)
	h.daemon.Set(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedOut}
		st.Access = readOnlyAccess
	})
	for _, args := range [][]string{{"vpn", "connect", "xym"}, {"vpn", "disconnect", "xym"}, {"vpn", "down"}, {"vpn", "up", "--cid", "ky3"}} {
		r := h.run(args...)
		r.want(t, 1, nil, []string{"bob (uid 1001) may only read the VPN status", "(ask an administrator to run: sudo runos vpn install --operator bob)"})
		if strings.Contains(r.stderr, "not signed in") || strings.Contains(r.stderr, "sign in") && !strings.Contains(r.stderr, "may only read") {
			t.Errorf("%q told a read-only user to sign in:\n%s", args, r.stderr)
		}
	}
	if len(h.signIns) != 0 || len(h.daemon.Calls()) != 0 {
		t.Errorf("a read-only user was signed in (%d) or the daemon asked to change: %q", len(h.signIns), h.daemon.Calls())
	}
}
