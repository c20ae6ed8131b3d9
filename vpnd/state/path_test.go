package state

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/wake"
	"github.com/runos/vpn/vpnd/wgcfg"
)

func relayed(hs time.Time, p wgcfg.PathReport) wgcfg.PeerReport {
	r := peer(key1, hs)
	r.Path = p
	return r
}

// TestDerivePath: clusters[].path and its reason come from the device's
// report; a relay that fails and a captive portal are said in the
// cluster's error and, for the portal, a warning.
func TestDerivePath(t *testing.T) {
	const relayURL = "https://10.77.0.21/runos-vpn/relay"
	cfg := ky3n1
	cfg.VPN.Relay = relayURL
	for _, tc := range []struct {
		name   string
		peer   wgcfg.PeerReport
		path   string
		peerUp bool
		err    string
		warn   string
	}{
		{"direct", relayed(t0.Add(-time.Second), wgcfg.PathReport{Path: "direct", Reason: "UDP first", Relay: relayURL}), "direct", true, "", ""},
		{"relayed", relayed(t0.Add(-time.Second), wgcfg.PathReport{Path: "relay", Reason: "a handshake initiation got no answer over UDP for 2.5s",
			Relay: relayURL, RelayUp: true}), "relay", true, "", ""},
		{"relay failing", relayed(time.Time{}, wgcfg.PathReport{Path: "relay", Relay: relayURL, RelayErr: "dial tcp 10.77.0.21:443: connection refused"}),
			"relay", false, "UDP 32768 to 10.77.0.21:32768 gets no answer, and the relay " + relayURL + " fails: dial tcp", ""},
		{"captive portal", relayed(time.Time{}, wgcfg.PathReport{Path: "relay", Relay: relayURL, RelayErr: "x509", Captive: "http://portal.lab"}),
			"relay", false, "the network needs a sign-in page first (http://portal.lab)", "the network needs a sign-in page first (http://portal.lab): open any web page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			in.Prefs = signedInPrefs("ky3")
			in.Map = dmap(cfg)
			in.Device = device(tc.peer)
			st := Derive(&in)
			c := st.Clusters[1]
			if c.CID != "ky3" || c.Path != tc.path || c.PeerUp != tc.peerUp || c.Relay != relayURL {
				t.Errorf("ky3: path %q peerUp %v relay %q", c.Path, c.PeerUp, c.Relay)
			}
			if !strings.Contains(c.Error, tc.err) || (tc.err == "") != (c.Error == "") {
				t.Errorf("error %q, want %q", c.Error, tc.err)
			}
			var warn string
			for _, w := range st.Warnings {
				if w.Code == localapi.WarnCaptivePortal {
					warn = w.Message
				}
			}
			if !strings.HasPrefix(warn, tc.warn) || (tc.warn == "") != (warn == "") {
				t.Errorf("captive warning %q, want %q", warn, tc.warn)
			}
			if p := Want(&in).Tunnel.Peers; len(p) != 1 || p[0].Relay != relayURL {
				t.Errorf("planned peers %+v: the relay URL must reach the engine", p)
			}
			b, _ := json.Marshal(c)
			if !strings.Contains(string(b), `"path":"`+tc.path+`"`) {
				t.Errorf("JSON %s has no path %q", b, tc.path)
			}
		})
	}
	// A disconnected cluster has no path, and the field is still there.
	in := base()
	st := Derive(&in)
	b, _ := json.Marshal(st.Clusters[0])
	if st.Clusters[0].Path != "" || !strings.Contains(string(b), `"path":""`) {
		t.Errorf("disconnected cluster: %s", b)
	}
	// A relay URL the daemon cannot dial is dropped, not an error.
	bad := ky3n1
	bad.VPN.Relay = "ftp://10.77.0.21/relay"
	in = base()
	in.Prefs = signedInPrefs("ky3")
	in.Map = dmap(bad)
	if p := Want(&in).Tunnel.Peers; len(p) != 1 || p[0].Relay != "" {
		t.Errorf("bad relay URL planned: %+v", p)
	}
}

// TestExpiredWhileAsleep: a session whose expiry fell inside the daemon's
// last sleep is said to have lapsed then, and nothing stays configured.
func TestExpiredWhileAsleep(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3")
	in.Prefs.ExpiresAt = t0.Add(-10 * time.Minute)
	in.Map = dmap(ky3n1)
	in.Device = device(peer(key1, t0.Add(-time.Hour)))
	in.Slept = wake.Sleep{From: t0.Add(-time.Hour), To: t0.Add(-time.Second)}
	st := Derive(&in)
	if st.Session.State != localapi.SessionExpired ||
		st.Session.Error != "your sign-in expired at "+in.Prefs.ExpiresAt.UTC().Format(time.RFC3339)+" while this computer was asleep" {
		t.Errorf("session %+v", st.Session)
	}
	if len(st.Warnings) != 1 || !strings.HasPrefix(st.Warnings[0].Message, "your sign-in expired at 2026-07-01 11:50 UTC while this computer was asleep: run `runos vpn up`") {
		t.Errorf("warnings %+v", st.Warnings)
	}
	if p := Want(&in); len(p.Tunnel.Peers) != 0 || len(p.DNS) != 0 || len(p.Tunnel.Routes) != 0 {
		t.Errorf("plan after the session lapsed: %+v", p)
	}
	if !st.Network.WokeAt.Equal(in.Slept.To) {
		t.Errorf("network.wokeAt %v", st.Network.WokeAt)
	}
	// Lapsed while awake: said without the sleep.
	in.Slept = wake.Sleep{From: t0.Add(-5 * time.Minute), To: t0.Add(-4 * time.Minute)}
	st = Derive(&in)
	if st.Session.Error != "your sign-in expired at "+in.Prefs.ExpiresAt.UTC().Format(time.RFC3339) || !strings.HasPrefix(st.Warnings[0].Message, "your sign-in expired at 2026-07-01 11:50 UTC: run") {
		t.Errorf("awake: session %+v warnings %+v", st.Session, st.Warnings)
	}
}

// TestHandshakeBeforeANetworkChangeIsNotUp: the tunnel re-keys after a
// network change or a wake, so only a handshake made since counts.
func TestHandshakeBeforeANetworkChangeIsNotUp(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3")
	in.Map = dmap(ky3n1)
	in.Device = device(peer(key1, t0.Add(-10*time.Second)))
	if !cluster1(Derive(&in)).PeerUp {
		t.Fatal("not up before the change")
	}
	in.NetworkChangedAt = t0.Add(-time.Second)
	if cluster1(Derive(&in)).PeerUp || ReadEvery(&in) != readPending {
		t.Error("a handshake from before the network change counts, or the daemon reads slowly")
	}
	in.Device = device(peer(key1, t0.Add(-500*time.Millisecond)))
	if !cluster1(Derive(&in)).PeerUp {
		t.Error("the new handshake does not count")
	}
	in.Slept = wake.Sleep{From: t0.Add(-time.Hour), To: t0.Add(-100 * time.Millisecond)}
	if cluster1(Derive(&in)).PeerUp {
		t.Error("a handshake from before the wake counts")
	}
}

func cluster1(st localapi.Status) localapi.ClusterStatus {
	for _, c := range st.Clusters {
		if c.CID == "ky3" {
			return c
		}
	}
	return localapi.ClusterStatus{}
}

// TestRelayOnAnotherHostRefused: a relay URL whose host is an address
// other than the VPN node's (the endpoint's) is not used, and the
// cluster's error says so; the cluster stays on UDP. A name is kept: the
// relay dial checks it resolves to the node.
func TestRelayOnAnotherHostRefused(t *testing.T) {
	for relay, want := range map[string]string{
		"https://203.0.113.66:8443/collect":     "",
		"https://10.77.0.21:8443/relay":         "https://10.77.0.21:8443/relay",
		"https://vpn.ky3.example.com/relay":     "https://vpn.ky3.example.com/relay",
		"https://user@10.77.0.21/relay":         "",
		"https://10.77.0.21/relay?next=evil":    "",
		"https://[2001:db8::1]/runos-vpn/relay": "",
	} {
		cfg := ky3n1
		cfg.VPN.Relay = relay
		in := base()
		in.Prefs = signedInPrefs("ky3")
		in.Map = dmap(cfg)
		p := Want(&in).Tunnel.Peers
		if len(p) != 1 || p[0].Relay != want {
			t.Errorf("relay %s: planned %+v, want relay %q", relay, p, want)
			continue
		}
		for _, c := range Derive(&in).Clusters {
			if c.CID == "ky3" && want == "" && strings.Contains(relay, "203.0.113.66") &&
				!strings.Contains(c.Error, "not the VPN node's address") {
				t.Errorf("relay %s: cluster %+v, want its error to say the relay is refused", relay, c)
			}
		}
	}
}
