package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

func TestRegisterDevice(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ada := e.signIn("ada@example.com")
	k := newKey(t).PublicKey().String()
	d1, err := ada.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: k, Name: "laptop", OS: "linux"})
	if err != nil || d1.Address != "100.96.0.2" || d1.User != "ada@example.com" || d1.PublicKey != k {
		t.Fatalf("first device = %+v, %v", d1, err)
	}
	// The same key again is the same device (a new name is kept).
	again, err := ada.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: k, Name: "laptop2", OS: "linux"})
	if err != nil || again.ID != d1.ID || again.Address != d1.Address || again.Name != "laptop2" {
		t.Fatalf("again = %+v, %v", again, err)
	}
	d2, err := ada.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "desk", OS: "darwin"})
	if err != nil || d2.Address != "100.96.0.3" {
		t.Fatalf("second device = %+v, %v", d2, err)
	}
	// Another user's key: conflict, nothing changes.
	bob := e.signIn("bob@example.com") // a sign-in is a change (its audit entry)
	before := e.version()
	_, err = bob.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: k, Name: "x", OS: "linux"})
	wantCode(t, err, 409, api.CodeConflict)
	if e.version() != before {
		t.Fatal("a refused registration changed something")
	}
	// Only the public key field: anything else in the body is refused.
	for _, body := range []string{
		`{"publicKey":"` + k + `","name":"x","os":"linux","privateKey":"` + k + `"}`,
		`{"publicKey":"abc","name":"x","os":"linux"}`,
		`{"publicKey":"` + base64.StdEncoding.EncodeToString(make([]byte, 31)) + `","name":"x","os":"linux"}`,
		`{"publicKey":"` + k + `","name":"","os":"linux"}`,
		`{"publicKey":"` + k + `","name":"x","os":"Linux OS"}`,
		`{"publicKey":"` + k + `","name":"x","os":"linux"} {}`,
		`[]`,
	} {
		status, code := e.raw(ada.Token, http.MethodPost, "/v1/devices", body)
		if status != 400 || code != api.CodeInvalid {
			t.Errorf("%s: %d %s, want 400 invalid", body, status, code)
		}
	}
	if e.version() != before {
		t.Fatal("a refused registration changed something")
	}
}

func TestJoinLeaveAndMaps(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")

	cc, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3")
	if err != nil {
		t.Fatal(err)
	}
	v := cc.VPN
	if cc.Domain != "ky3.rjwrn.example.com" || v.ServiceID != "wg-ky3" || v.NodeID != "n1" || v.Endpoint != "10.77.0.21:32768" ||
		v.Subnet != "100.100.1.0/24" || v.Address != "100.100.1.1" || v.DNS != "100.100.1.1" || v.Ready || v.PublicKey != "" ||
		strings.Join(v.Domains, ",") != "ky3.rjwrn.example.com" {
		t.Fatalf("join ky3 = %+v", cc)
	}
	// The gateway serves with the device as its peer.
	gm, err := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0)
	if err != nil || gm.Serve == nil || gm.Serve.Role != api.GatewayActive || len(gm.Serve.Peers) != 1 ||
		gm.Serve.Peers[0].Address != d.dev.Address || gm.Serve.DevicePool != "100.96.0.0/16" || gm.Serve.Port != 32768 ||
		gm.Serve.Address != "100.100.1.1" || gm.Serve.Subnet != "100.100.1.0/24" {
		t.Fatalf("gateway map = %+v %+v", gm, gm.Serve)
	}
	if other, _ := e.gateway("ky3", "n2").GatewayMap(ctx, 0, 0); other.Serve != nil {
		t.Fatalf("n2 asked to serve: %+v", other.Serve)
	}
	// The device waits on its map; the gateway coming up wakes it with the key.
	dm, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
	if err != nil || len(dm.Clusters) != 1 || dm.Clusters[0].VPN.Ready || dm.Session.User != "ada@example.com" {
		t.Fatalf("device map = %+v, %v", dm, err)
	}
	p := poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(ctx, d.dev.ID, dm.Version, time.Minute) })
	e.waitWatchers(1)
	k1 := newKey(t)
	e.serve("ky3", "n1", k1)
	dm2, err := recv(t, p)
	if err != nil || dm2.Version <= dm.Version || !dm2.Clusters[0].VPN.Ready || dm2.Clusters[0].VPN.PublicKey != k1.PublicKey().String() {
		t.Fatalf("map after the gateway came up = %+v, %v", dm2, err)
	}
	svc, err := e.op.VPNService(ctx, "ky3", "wg-ky3", 0, 0)
	if err != nil || svc.State != api.ServiceServing || svc.Devices != 1 || svc.Endpoint != "10.77.0.21:32768" || svc.AddressKind != api.AddressPrivate {
		t.Fatalf("service = %+v, %v", svc, err)
	}

	// xym with its custom domain; two clusters, distinct subnets.
	cc, err = d.c.JoinCluster(ctx, d.dev.ID, "xym")
	if err != nil || cc.VPN.Subnet != "100.100.2.0/24" || strings.Join(cc.VPN.Domains, ",") != "xym.rjwrn.example.com,apps.example.org" ||
		cc.VPN.Endpoint != "198.51.100.31:32768" {
		t.Fatalf("join xym = %+v, %v", cc, err)
	}
	// Joining twice changes nothing.
	before := e.version()
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "xym"); err != nil || e.version() != before {
		t.Fatalf("second join: %v, version %d → %d", err, before, e.version())
	}
	// Refusals.
	_, err = d.c.JoinCluster(ctx, d.dev.ID, "nb1")
	wantCode(t, err, 409, api.CodeRefused)
	_, err = d.c.JoinCluster(ctx, d.dev.ID, "abc")
	ae := wantCode(t, err, 409, api.CodeRefused)
	if !strings.Contains(ae.Hint, "runos services wireguard add --cid abc") {
		t.Fatalf("hint = %q", ae.Hint)
	}
	_, err = d.c.JoinCluster(ctx, d.dev.ID, "zzz")
	wantCode(t, err, 404, api.CodeNotFound)
	bob := e.signIn("bob@example.com")
	before = e.version() // bob's sign-in is a change
	_, err = bob.JoinCluster(ctx, d.dev.ID, "ky3")
	wantCode(t, err, 404, api.CodeNotFound) // not bob's device
	if e.version() != before {
		t.Fatal("a refused join changed something")
	}

	// Leave ky3: gone from the map and from the gateway's peers.
	if err := d.c.LeaveCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	dm3, _ := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
	if len(dm3.Clusters) != 1 || dm3.Clusters[0].CID != "xym" || dm3.Version <= dm2.Version {
		t.Fatalf("map after leaving = %+v", dm3)
	}
	if gm, _ := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); len(gm.Serve.Peers) != 0 {
		t.Fatalf("peer left behind: %+v", gm.Serve.Peers)
	}
	if err := d.c.LeaveCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatalf("leaving twice: %v", err)
	}
}

func TestLongPollSemantics(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	dm, _ := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)

	// A change elsewhere (xym's gateway coming up) does not answer it; the
	// wait passing answers the same document, same version.
	p := poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(ctx, d.dev.ID, dm.Version, 30*time.Second) })
	e.waitWatchers(1)
	e.serve("xym", "n1", newKey(t))
	e.waitWatchers(1)
	e.clk.Advance(30 * time.Second)
	same, err := recv(t, p)
	if err != nil || same.Version != dm.Version {
		t.Fatalf("after the wait: %+v, %v (want version %d)", same, err, dm.Version)
	}
	// A version from the future (an older database) answers at once.
	if m, err := d.c.DeviceMap(ctx, d.dev.ID, dm.Version+1000, time.Minute); err != nil || m.Version != dm.Version {
		t.Fatalf("future since: %+v, %v", m, err)
	}
	// Resumable: a change made while nobody polled is answered at once to
	// the next poll with the version seen before.
	e.serve("ky3", "n1", newKey(t))
	m, err := d.c.DeviceMap(ctx, d.dev.ID, dm.Version, time.Minute)
	if err != nil || m.Version <= dm.Version || !m.Clusters[0].VPN.Ready {
		t.Fatalf("resume: %+v, %v", m, err)
	}
	// Bad parameters.
	err = d.c.Do(ctx, http.MethodGet, "/v1/devices/"+d.dev.ID+"/map?since=x", nil, nil)
	wantCode(t, err, 400, api.CodeInvalid)
	err = d.c.Do(ctx, http.MethodGet, "/v1/devices/"+d.dev.ID+"/map?since=1&wait=-1", nil, nil)
	wantCode(t, err, 400, api.CodeInvalid)
	// A poll is held at most 300 s whatever it asks for.
	latest := m.Version
	p = poll(func() (*api.DeviceMap, error) {
		var m api.DeviceMap
		err := d.c.Do(ctx, http.MethodGet, "/v1/devices/"+d.dev.ID+"/map?since="+strconv.FormatUint(latest, 10)+"&wait=100000", nil, &m)
		return &m, err
	})
	e.waitWatchers(1)
	e.clk.Advance(300 * time.Second)
	if _, err := recv(t, p); err != nil {
		t.Fatal(err)
	}
}

// The pre-encoded answer is byte for byte what api.DeviceMap would give.
func TestDeviceMapWireMatchesAPI(t *testing.T) {
	cc := api.ClusterConfig{CID: "ky3", AID: "rjwrn", Name: "n", Domain: "d", VPN: api.VPNConfig{ServiceID: "s", Domains: []string{"d"}, Ready: true}}
	// HTML characters, which json.Marshal escapes, and a name that needs quoting.
	cc2 := api.ClusterConfig{CID: "xym", AID: "rjwrn", Name: `<a & "b">`, Domain: "d", VPN: api.VPNConfig{ServiceID: "s2", Domains: []string{}}}
	m := api.DeviceMap{Version: 1<<53 + 1, Device: api.Device{ID: "dev", Name: "ada's <laptop>", Address: "100.96.0.2"},
		Session: api.SessionInfo{ID: "ses", User: "u", ExpiresAt: t0}, Clusters: []api.ClusterConfig{cc}}
	enc := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	for _, clusters := range [][]api.ClusterConfig{{}, {cc}, {cc, cc2}} {
		m.Clusters = clusters
		w := deviceMapWire{Version: m.Version, Device: enc(m.Device), Session: enc(m.Session), Clusters: []json.RawMessage{}}
		for _, c := range clusters {
			w.Clusters = append(w.Clusters, enc(c))
		}
		a, _ := json.Marshal(m)
		if b := w.appendJSON(nil); string(a) != string(b) {
			t.Fatalf("wire %s\n api %s", b, a)
		}
	}
}
