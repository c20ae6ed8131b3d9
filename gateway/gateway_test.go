package gateway

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/syncbuf"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

type harness struct {
	ctl  *fakeControl
	srv  *fakeServer
	dns  *fakeDNS
	key  wgtypes.Key
	logs *syncbuf.Buffer
	stop context.CancelFunc
	done chan error
}

func start(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	key, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{ctl: newFakeControl("n1"), srv: &fakeServer{}, dns: &fakeDNS{}, key: key, logs: &syncbuf.Buffer{}, done: make(chan error, 1)}
	cfg := Config{
		Control:    h.ctl,
		NodeID:     "n1",
		Key:        key,
		Interface:  "wgtest",
		Heartbeat:  time.Hour, // reports in these tests come from changes, not heartbeats
		PollWait:   time.Hour,
		Version:    "test",
		Logger:     slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OpenServer: h.srv.openFunc,
		DNS:        h.dns,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		<-h.done
		if strings.Contains(h.logs.String(), key.String()) {
			t.Error("the private key appears in the log")
		}
	})
	return h
}

func peer(t *testing.T, id, addr string) (api.GatewayPeer, wgtypes.Key) {
	t.Helper()
	k, _ := wgtypes.GeneratePrivateKey()
	return api.GatewayPeer{DeviceID: id, PublicKey: k.PublicKey().String(), Address: addr}, k.PublicKey()
}

func service(role string, peers ...api.GatewayPeer) *api.GatewayService {
	return &api.GatewayService{
		ServiceID:  "svc1",
		CID:        "ky3",
		Role:       role,
		Port:       32768,
		Subnet:     "100.100.1.0/24",
		Address:    "100.100.1.1",
		DevicePool: "100.96.0.0/16",
		Domains:    []string{"ky3.rjwrn.example.com"},
		Peers:      peers,
	}
}

func atVersion(v uint64) func(api.GatewayReport) bool {
	return func(r api.GatewayReport) bool { return r.MapVersion == v }
}

func TestRolesNeverRestartTheInterface(t *testing.T) {
	h := start(t, nil)
	r := h.ctl.waitReport(t, "for map 1", atVersion(1))
	if r.Listening || r.PublicKey != h.key.PublicKey().String() || r.Version != "test" {
		t.Fatalf("first report: %+v", r)
	}
	p1, _ := peer(t, "dev1", "100.96.0.2")
	for _, role := range []string{api.GatewayStandby, api.GatewayActive, api.GatewayDraining} {
		v := h.ctl.set(service(role, p1))
		r := h.ctl.waitReport(t, "for "+role, atVersion(v))
		if !r.Listening || r.ListenPort != 32768 || r.ServiceID != "svc1" || r.Error != "" {
			t.Fatalf("%s: %+v", role, r)
		}
	}
	if opens, closes, applies := h.srv.counts(); opens != 1 || closes != 0 || applies != 3 {
		t.Fatalf("opens=%d closes=%d applies=%d, want the interface opened once and never closed", opens, closes, applies)
	}
	v := h.ctl.set(nil)
	r = h.ctl.waitReport(t, "after serve nil", atVersion(v))
	if r.Listening || r.ListenPort != 0 || len(r.Handshakes) != 0 {
		t.Fatalf("after serve nil: %+v", r)
	}
	if _, closes, _ := h.srv.counts(); closes != 1 {
		t.Fatalf("interface closed %d times", closes)
	}
	h.dns.mu.Lock()
	if h.dns.closes != 1 || len(h.dns.zones) != 3 {
		t.Errorf("dns: closes=%d zones=%d", h.dns.closes, len(h.dns.zones))
	}
	h.dns.mu.Unlock()
	logs := h.logs.String()
	for _, want := range []string{"msg=serving", "from=standby to=active", "from=active to=draining", `msg="stopped serving"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

func TestHandshakeReportedAtOnce(t *testing.T) {
	h := start(t, nil)
	p1, k1 := peer(t, "dev1", "100.96.0.2")
	v := h.ctl.set(service(api.GatewayStandby, p1))
	h.ctl.waitReport(t, "listening", func(r api.GatewayReport) bool { return r.MapVersion == v && r.Listening })
	at := time.Now()
	h.srv.setHandshake(k1, at)
	// The heartbeat is an hour away: only the watch can report this.
	r := h.ctl.waitReport(t, "with the handshake", func(r api.GatewayReport) bool { return len(r.Handshakes) == 1 })
	if r.Handshakes[0].PublicKey != k1.String() || !r.Handshakes[0].At.Equal(at) {
		t.Fatalf("handshake: %+v", r.Handshakes)
	}
	if !strings.Contains(h.logs.String(), "msg=handshake device=dev1") {
		t.Errorf("no handshake log line:\n%s", h.logs.String())
	}
}

func TestBadMapChangesNothing(t *testing.T) {
	h := start(t, nil)
	p1, _ := peer(t, "dev1", "100.96.0.2")
	v := h.ctl.set(service(api.GatewayActive, p1))
	h.ctl.waitReport(t, "listening", func(r api.GatewayReport) bool { return r.MapVersion == v && r.Listening })
	bad := service(api.GatewayActive, p1, api.GatewayPeer{DeviceID: "dev2", PublicKey: "not-a-key", Address: "100.96.0.3"})
	v = h.ctl.set(bad)
	r := h.ctl.waitReport(t, "for the bad map", atVersion(v))
	if !strings.Contains(r.Error, "peer dev2: public key") || !r.Listening {
		t.Fatalf("bad map: %+v", r)
	}
	if opens, closes, applies := h.srv.counts(); opens != 1 || closes != 0 || applies != 1 {
		t.Fatalf("a refused map touched the server: opens=%d closes=%d applies=%d", opens, closes, applies)
	}
	// The next good map clears the error.
	p2, _ := peer(t, "dev2", "100.96.0.3")
	v = h.ctl.set(service(api.GatewayActive, p1, p2))
	r = h.ctl.waitReport(t, "for the good map", atVersion(v))
	if r.Error != "" || !r.Listening {
		t.Fatalf("good map after a bad one: %+v", r)
	}
}

func TestFailedBringUpLeavesNothingAndRetries(t *testing.T) {
	h := start(t, nil)
	h.srv.mu.Lock()
	h.srv.failApply = 2
	h.srv.mu.Unlock()
	p1, _ := peer(t, "dev1", "100.96.0.2")
	v := h.ctl.set(service(api.GatewayStandby, p1))
	r := h.ctl.waitReport(t, "with the error", func(r api.GatewayReport) bool { return r.MapVersion == v && r.Error != "" })
	if r.Listening || !strings.Contains(r.Error, "serve ky3: UDP port 32768 is already in use") {
		t.Fatalf("failed bring-up: %+v", r)
	}
	r = h.ctl.waitReport(t, "listening after retries", func(r api.GatewayReport) bool { return r.Listening })
	if r.Error != "" {
		t.Fatalf("after the retry: %+v", r)
	}
	if opens, closes, _ := h.srv.counts(); opens != 3 || closes != 2 {
		t.Fatalf("opens=%d closes=%d: every failed bring-up must close what it opened", opens, closes)
	}
}

func TestTokenOfAnotherNodeStops(t *testing.T) {
	key, _ := wgtypes.GeneratePrivateKey()
	err := Run(context.Background(), Config{Control: newFakeControl("n2"), NodeID: "n1", Key: key, OpenServer: (&fakeServer{}).openFunc, DNS: &fakeDNS{}})
	if err == nil || !strings.Contains(err.Error(), "belongs to node n2, not n1") {
		t.Fatalf("err = %v", err)
	}
}

func TestFollowResumesFromLastVersion(t *testing.T) {
	h := start(t, nil)
	h.ctl.waitReport(t, "for map 1", atVersion(1))
	h.ctl.mu.Lock()
	h.ctl.failMaps = 3
	h.ctl.mu.Unlock()
	// The held poll is woken by the change and fails, and so do the next
	// two; every retry must ask from version 1, the last one seen.
	v := h.ctl.set(nil)
	h.ctl.waitReport(t, "after errors", atVersion(v))
	h.ctl.mu.Lock()
	sinces := append([]uint64(nil), h.ctl.sinces...)
	h.ctl.mu.Unlock()
	want := []uint64{0, 1, 1, 1, 1}
	if len(sinces) < len(want) {
		t.Fatalf("sinces = %v, want %v then %d", sinces, want, v)
	}
	for i, w := range want {
		if sinces[i] != w {
			t.Fatalf("sinces = %v, want %v then %d", sinces, want, v)
		}
	}
	for _, s := range sinces[len(want):] {
		if s != v {
			t.Fatalf("sinces = %v, want %v then %d", sinces, want, v)
		}
	}
	if !strings.Contains(h.logs.String(), "reachable again") {
		t.Errorf("recovery not logged")
	}
}

func TestShutdownStopsServingAndSaysSo(t *testing.T) {
	h := start(t, nil)
	p1, _ := peer(t, "dev1", "100.96.0.2")
	v := h.ctl.set(service(api.GatewayActive, p1))
	h.ctl.waitReport(t, "listening", func(r api.GatewayReport) bool { return r.MapVersion == v && r.Listening })
	h.stop()
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	h.done <- nil // for the cleanup
	if _, closes, _ := h.srv.counts(); closes != 1 {
		t.Fatalf("interface not closed on shutdown")
	}
	h.ctl.waitReport(t, "final, not listening", func(r api.GatewayReport) bool { return !r.Listening && r.MapVersion == v })
}
