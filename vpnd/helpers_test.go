package vpnd

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/internal/fakecontrol"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/store"
	"github.com/runos/vpn/vpnd/wgcfg"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// fakeEngine stands in for the tunnel in tests without root: it keeps the
// applied config and reports peers, handshaking at once when told to.
type fakeEngine struct {
	mu        sync.Mutex
	cfg       wgcfg.Config
	peers     map[wgtypes.Key]wgcfg.PeerReport
	handshake bool // new peers handshake at once
	applyErr  error
	applies   int
	nudges    int
	rebinds   int // NetworkChanged calls
	uplinkMTU int
	closed    bool
	key       wgtypes.Key // zero: the key the daemon started with (t0Key)
}

func (e *fakeEngine) SetPrivateKey(k wgtypes.Key) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.key = k
	return nil
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{peers: map[wgtypes.Key]wgcfg.PeerReport{}, handshake: true}
}

func (e *fakeEngine) Apply(c wgcfg.Config) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.applies++
	if e.applyErr != nil {
		return e.applyErr
	}
	e.cfg = c
	keep := map[wgtypes.Key]wgcfg.PeerReport{}
	for _, p := range c.Peers {
		r, ok := e.peers[p.PublicKey]
		if !ok {
			r = wgcfg.PeerReport{PublicKey: p.PublicKey, Endpoint: p.Endpoint, AddedAt: time.Now()}
			if e.handshake {
				r.LastHandshake = time.Now()
			}
		}
		keep[p.PublicKey] = r
	}
	e.peers = keep
	return nil
}

func (e *fakeEngine) Read() wgcfg.Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	pub := mustKey(t0Key).PublicKey()
	if e.key != (wgtypes.Key{}) {
		pub = e.key.PublicKey()
	}
	r := wgcfg.Report{Interface: "wgfake", Up: !e.closed, PublicKey: pub, Addresses: e.cfg.Addresses}
	for _, p := range e.peers {
		r.Peers = append(r.Peers, p)
	}
	return r
}

func (e *fakeEngine) Traffic() (map[wgtypes.Key]uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[wgtypes.Key]uint64{}
	for k, p := range e.peers {
		m[k] = uint64(p.RxBytes + p.TxBytes)
	}
	return m, nil
}

func (e *fakeEngine) Nudge() {
	e.mu.Lock()
	e.nudges++
	e.mu.Unlock()
}

func (e *fakeEngine) NetworkChanged() error {
	e.mu.Lock()
	e.rebinds++
	e.mu.Unlock()
	return nil
}

func (e *fakeEngine) SetUplinkMTU(mtu int) {
	e.mu.Lock()
	e.uplinkMTU = mtu
	e.mu.Unlock()
}

func (e *fakeEngine) Probe() {}

func (e *fakeEngine) Handshake(k wgtypes.Key) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.peers[k]
	if !ok {
		return errors.New("no such peer")
	}
	if e.handshake {
		r.LastHandshake = time.Now()
		e.peers[k] = r
	}
	return nil
}

func (e *fakeEngine) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	return nil
}

func (e *fakeEngine) config() wgcfg.Config {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg
}

const t0Key = "device"

func mustKey(seed string) wgtypes.Key {
	var k wgtypes.Key
	copy(k[:], seed)
	k[31] = 7
	return k
}

// world is a fake control over real HTTPS with two clusters.
type world struct {
	fc     *fakecontrol.Server
	url    string
	caFile string
	keys   map[string]wgtypes.Key // server keys by "cid/node"
	tls    *tls.Config            // the server's, for a second address of the same control
}

// secondURL serves the same fake control on another address: to the
// daemon, another control server.
func (w *world) secondURL(t *testing.T) string {
	ts := httptest.NewUnstartedServer(w.fc)
	ts.TLS = w.tls
	ts.StartTLS()
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	return ts.URL
}

func newWorld(t *testing.T) *world {
	t.Helper()
	fc := fakecontrol.New()
	caFile, tlsCfg := fakecontrol.TLS(t, net.ParseIP("127.0.0.1"))
	ts := httptest.NewUnstartedServer(fc)
	ts.TLS = tlsCfg
	ts.StartTLS()
	t.Cleanup(func() { fc.Close(); ts.CloseClientConnections(); ts.Close() })
	w := &world{fc: fc, url: ts.URL, caFile: caFile, keys: map[string]wgtypes.Key{}, tls: tlsCfg}
	w.fc.AddCluster(api.Cluster{CID: "ky3", AID: "rjwrn", Name: "tc3-ky3", Domain: "ky3.rjwrn.example.com", UserVPN: "wireguard"},
		w.vpn("ky3", "n1", "10.1.0.2:32768", "100.100.1"))
	w.fc.AddCluster(api.Cluster{CID: "xym", AID: "rjwrn", Name: "tc2-xym", Domain: "xym.rjwrn.example.com", UserVPN: "wireguard"},
		w.vpn("xym", "n1", "10.3.0.2:32768", "100.100.2"))
	return w
}

func (w *world) vpn(cid, node, ep, net24 string) api.VPNConfig {
	k, _ := wgtypes.GeneratePrivateKey()
	w.keys[cid+"/"+node] = k
	return api.VPNConfig{ServiceID: "svc-" + cid, NodeID: node, PublicKey: k.PublicKey().String(), Endpoint: ep,
		Subnet: net24 + ".0/24", Address: net24 + ".1", DNS: net24 + ".1", Domains: []string{cid + ".rjwrn.example.com"}, Ready: true}
}

func (w *world) serverKey(cid, node string) wgtypes.Key { return w.keys[cid+"/"+node].PublicKey() }

type testDaemon struct {
	*daemon
	eng    *fakeEngine
	dir    store.Dir
	cancel context.CancelFunc
	done   chan struct{}
}

// startDaemon runs a daemon with a fake engine against w, in dir; opts
// change it before it starts.
func startDaemon(t *testing.T, w *world, dir string, opts ...func(*daemon)) *testDaemon {
	t.Helper()
	sd, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := sd.Key()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	eng := newFakeEngine()
	d := &daemon{
		log:   slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		clock: time.Now, dir: sd, public: key.PublicKey(), hostname: "laptop", goos: "linux",
		eng: eng, mapWait: 2 * time.Second, backoffMin: 10 * time.Millisecond, backoffMax: 200 * time.Millisecond,
		ctx: ctx, wakeRead: make(chan struct{}, 1), wakePending: make(chan struct{}, 1), counts: newCounters(time.Now()),
		newControl: func(apiURL, token string) (control, error) { return api.NewClient(apiURL, token, w.caFile) },
	}
	for _, o := range opts {
		o(d)
	}
	prefs, _ := sd.LoadPrefs()
	d.in = state.Inputs{Version: "test", Interface: "wgfake", Prefs: prefs}
	d.apply = newApplier()
	d.mu.Lock()
	d.restoreKeptLocked()
	d.updateLocked()
	if d.in.SignedIn() {
		ctl, _ := d.newControl(prefs.APIURL, prefs.AccessToken)
		d.startSyncLocked(ctl)
	}
	d.mu.Unlock()
	done := make(chan struct{})
	var loops sync.WaitGroup
	loops.Go(func() { d.applyLoop(ctx) })
	loops.Go(func() { d.pendingLoop(ctx) })
	loops.Go(func() { d.readLoop(ctx) })
	go func() { loops.Wait(); close(done) }()
	td := &testDaemon{daemon: d, eng: eng, dir: sd, cancel: cancel, done: done}
	t.Cleanup(td.stop)
	return td
}

func (td *testDaemon) stop() {
	td.cancel()
	<-td.done
	td.mu.Lock()
	s := td.sess
	td.stopSyncLocked()
	td.mu.Unlock()
	if s != nil {
		<-s.done
	}
}

// eventually polls cond (a status check) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func cluster(st localapi.Status, cid string) localapi.ClusterStatus {
	for _, c := range st.Clusters {
		if c.CID == cid {
			return c
		}
	}
	return localapi.ClusterStatus{}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
