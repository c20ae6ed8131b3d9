package relay_test

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	gwrelay "github.com/runos/vpn/gateway/relay"
	"github.com/runos/vpn/internal/relaywire"
	"github.com/runos/vpn/vpnd/relay"
)

// blockable is wireguard-go's own Bind with a switch that drops every UDP
// datagram both ways: a network that lets no UDP through, made in process.
type blockable struct {
	conn.Bind
	blocked atomic.Bool
}

func (b *blockable) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	fns, p, err := b.Bind.Open(port)
	for i, fn := range fns {
		fns[i] = func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
			for {
				n, err := fn(bufs, sizes, eps)
				if err != nil || !b.blocked.Load() {
					return n, err
				}
			}
		}
	}
	return fns, p, err
}

func (b *blockable) Send(bufs [][]byte, ep conn.Endpoint) error {
	if b.blocked.Load() {
		return nil
	}
	return b.Bind.Send(bufs, ep)
}

var (
	laptopIP = netip.MustParseAddr("100.96.0.2")
	serverIP = netip.MustParseAddr("100.100.1.1")
)

// pair is a laptop (this package's Bind) and a node (gateway/relay's Bind
// and relay server) running real wireguard-go devices on in-memory TUNs,
// talking over loopback UDP or the relay.
type pair struct {
	t          *testing.T
	laptop     *device.Device
	server     *device.Device
	ltun, stun *tuntest.ChannelTUN
	bind       *relay.Bind
	udp        *blockable
	gw         *gwrelay.Bind
	changed    chan struct{}
	// onHandshake, set by an option, is the laptop Bind's OnHandshake.
	onHandshake func()
	replies     chan time.Time
	checks      atomic.Int32
	// down makes the node's relay refuse every stream (as the node's
	// ingress does while its gateway is down); refused counts those.
	down    atomic.Bool
	refused atomic.Int32
	lkey    wgtypes.Key // the laptop's
	skey    wgtypes.Key // the server's
	ep      netip.AddrPort
}

// newPair starts the pair; opts change it before the laptop starts.
func newPair(t *testing.T, blocked bool, ticket string, opts ...func(*pair)) *pair {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lkey, _ := wgtypes.GeneratePrivateKey()
	skey, _ := wgtypes.GeneratePrivateKey()
	p := &pair{t: t, ltun: tuntest.NewChannelTUN(), stun: tuntest.NewChannelTUN(),
		changed: make(chan struct{}, 100), replies: make(chan time.Time, 1000), lkey: lkey, skey: skey}
	for _, o := range opts {
		o(p)
	}

	// The node: wireguard-go on gateway/relay's Bind, its relay over TLS.
	p.gw = gwrelay.NewBind(conn.NewStdNetBind(), log)
	p.server = device.NewDevice(p.stun.TUN(), p.gw, device.NewLogger(device.LogLevelError, "server "))
	t.Cleanup(p.server.Close)
	ipc(t, p.server, fmt.Sprintf("private_key=%s\nlisten_port=0\npublic_key=%s\nallowed_ip=%s/32\n",
		hexKey(skey), hexKey(lkey.PublicKey()), laptopIP))
	if err := p.server.Up(); err != nil {
		t.Fatal(err)
	}
	port := listenPort(t, p.server)
	serving := func() bool {
		if p.down.Load() {
			p.refused.Add(1)
			return false
		}
		return true
	}
	srv := httptest.NewTLSServer(&gwrelay.Server{Bind: p.gw, Log: log, Serving: serving,
		Check: func(_ context.Context, ticket string, key wgtypes.Key) (string, error) {
			p.checks.Add(1)
			if ticket != "tok" || key != lkey.PublicKey() {
				return "", &api.Error{Status: 401, Code: api.CodeUnauthorized, Message: "unknown or revoked token"}
			}
			return "dev-1", nil
		}})
	t.Cleanup(srv.Close)
	go p.answerPings()

	// The laptop.
	p.udp = &blockable{Bind: conn.NewStdNetBind()}
	p.udp.blocked.Store(blocked)
	ep := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
	p.ep = ep
	p.bind = relay.New(relay.Config{
		Inner: p.udp, Log: log, Key: lkey.PublicKey(),
		TLS: func() (*tls.Config, error) { return srv.Client().Transport.(*http.Transport).TLSClientConfig, nil }, Ticket: func(context.Context, string) (string, time.Time, error) { return ticket, time.Time{}, nil },
		Rehandshake: func(netip.AddrPort) {
			if peer := p.laptop.LookupPeer(device.NoisePublicKey(skey.PublicKey())); peer != nil {
				_ = peer.SendHandshakeInitiation(false)
			}
		},
		Keepalive: func(netip.AddrPort) {
			if peer := p.laptop.LookupPeer(device.NoisePublicKey(skey.PublicKey())); peer != nil {
				peer.SendKeepalive()
			}
		},
		OnChange: func() {
			select {
			case p.changed <- struct{}{}:
			default:
			}
		},
		OnHandshake: p.onHandshake,
	})
	t.Cleanup(p.bind.Stop)
	p.laptop = device.NewDevice(p.ltun.TUN(), p.bind, device.NewLogger(device.LogLevelError, "laptop "))
	t.Cleanup(p.laptop.Close)
	p.bind.SetDests([]relay.Dest{{CID: "ky3", Endpoint: ep, RelayURL: srv.URL + relaywire.Path}})
	ipc(t, p.laptop, fmt.Sprintf("private_key=%s\npublic_key=%s\nendpoint=%s\nallowed_ip=%s/32\npersistent_keepalive_interval=25\n",
		hexKey(lkey), hexKey(skey.PublicKey()), ep, serverIP))
	if err := p.laptop.Up(); err != nil {
		t.Fatal(err)
	}
	go p.readReplies()
	return p
}

func hexKey(k wgtypes.Key) string { return hex.EncodeToString(k[:]) }

func ipc(t *testing.T, d *device.Device, cfg string) {
	t.Helper()
	if err := d.IpcSet(cfg); err != nil {
		t.Fatal(err)
	}
}

func listenPort(t *testing.T, d *device.Device) uint16 {
	t.Helper()
	s, err := d.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(l, "listen_port="); ok {
			n, _ := strconv.Atoi(v)
			return uint16(n)
		}
	}
	t.Fatal("no listen port")
	return 0
}

// answerPings plays the node's IP stack: every packet the server's tunnel
// delivers is answered with a packet back to the laptop.
func (p *pair) answerPings() {
	for range p.stun.Inbound {
		p.stun.Outbound <- tuntest.Ping(laptopIP, serverIP)
	}
}

func (p *pair) readReplies() {
	for range p.ltun.Inbound {
		select {
		case p.replies <- time.Now():
		default:
		}
	}
}

// ping sends one packet into the laptop's tunnel.
func (p *pair) ping() { p.ltun.Outbound <- tuntest.Ping(serverIP, laptopIP) }

// waitReply pings every 50 ms until a reply arrives or timeout passes.
func (p *pair) waitReply(timeout time.Duration) bool {
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.replies:
			return true
		case <-tick.C:
			p.ping()
		case <-deadline:
			return false
		}
	}
}

func (p *pair) path() relay.State {
	st := p.bind.States()
	if len(st) != 1 {
		p.t.Fatalf("states %+v", st)
	}
	return st[0]
}

// waitPath waits (on the Bind's change notices) until the path is want.
func (p *pair) waitPath(want relay.Path, timeout time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	deadline := time.After(timeout)
	for p.path().Path != want {
		select {
		case <-p.changed:
		case <-deadline:
			p.t.Fatalf("path %s after %s, want %s (%+v)", p.path().Path, timeout, want, p.path())
		}
	}
	return time.Since(start)
}

// every calls f every d on a goroutine of its own until the returned
// stop is called.
func every(d time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				f()
			}
		}
	}()
	return func() { close(done) }
}

func drain(c chan time.Time) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func TestUDPWorksNoRelay(t *testing.T) {
	p := newPair(t, false, "tok")
	if !p.waitReply(5 * time.Second) {
		t.Fatal("no reply over UDP")
	}
	if st := p.path(); st.Path != relay.Direct || st.Reason != "UDP first" {
		t.Errorf("UDP answers but path %+v", st)
	}
	// On a loaded machine (the race detector, other tests) UDP's answer
	// may take longer than its 150 ms head start: then the relay is tried
	// too, and UDP still wins.
	if n := p.checks.Load(); n != 0 {
		t.Logf("the relay was tried beside UDP (%d checks): the handshake took longer than UDP's head start", n)
	}
}

func TestBlockedFromTheStartGoesOverTheRelay(t *testing.T) {
	p := newPair(t, true, "tok")
	start := time.Now()
	p.ping()
	took := p.waitPath(relay.Relay, 10*time.Second)
	if !p.waitReply(10 * time.Second) {
		t.Fatalf("no reply over the relay; state %+v", p.path())
	}
	t.Logf("relayed after %s, first reply after %s", took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	// UDP's head start (150 ms), a dial and a round trip: a generous
	// bound, not a measure of speed (the machine may be loaded).
	if took > 3*time.Second {
		t.Errorf("relayed after %s: the relay was not raced beside UDP", took)
	}
	st := p.path()
	if !st.RelayUp || !strings.Contains(st.Reason, "the relay answered first") || p.gw.Streams() != 1 {
		t.Errorf("state %+v, streams %d", st, p.gw.Streams())
	}

	// UDP comes back: a probe finds it within 5 s (wireguard-go's
	// handshake spacing) and the path goes back to direct.
	p.udp.blocked.Store(false)
	back := p.waitPath(relay.Direct, 10*time.Second)
	t.Logf("back to direct after %s", back.Round(time.Millisecond))
	drain(p.replies)
	if !p.waitReply(5 * time.Second) {
		t.Fatal("no reply over UDP after coming back")
	}
}

func TestBlockedMidFlowResumesOverTheRelay(t *testing.T) {
	p := newPair(t, false, "tok")
	if !p.waitReply(5 * time.Second) {
		t.Fatal("no reply over UDP")
	}
	// A steady stream of pings; UDP goes away in the middle of it.
	defer every(20*time.Millisecond, p.ping)()
	for range 10 { // the stream flows
		<-p.replies
	}
	drain(p.replies)
	blockedAt := time.Now()
	p.udp.blocked.Store(true)
	var last time.Time
	for {
		select {
		case at := <-p.replies:
			if at.After(blockedAt.Add(50 * time.Millisecond)) {
				last = at
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no reply within 10 s of the block; state %+v", p.path())
		}
		if !last.IsZero() {
			break
		}
	}
	gap := last.Sub(blockedAt)
	t.Logf("traffic resumed %s after the block, path %s", gap.Round(time.Millisecond), p.path().Path)
	if gap > 3*time.Second || p.path().Path != relay.Relay {
		t.Errorf("resumed after %s over %s, want well within 3 s over the relay", gap, p.path().Path)
	}
}

// TestBlockedMidDownloadResumesOverTheRelay: the node sends, the laptop
// only acknowledges what arrives (a download), and UDP goes right after a
// handshake, so wireguard-go may not send another for 5 s: the race's
// keepalive over the relay moves the server's endpoint there and the
// download resumes within a second, not after the 5 s.
func TestBlockedMidDownloadResumesOverTheRelay(t *testing.T) {
	p := newPair(t, false, "tok")
	if !p.waitReply(5 * time.Second) { // the handshake, just now
		t.Fatal("no reply over UDP")
	}
	// The download: the node sends every 20 ms.
	defer every(20*time.Millisecond, func() { p.stun.Outbound <- tuntest.Ping(laptopIP, serverIP) })()
	for range 5 {
		<-p.replies
	}
	p.udp.blocked.Store(true)
	blockedAt := time.Now()
	p.ping() // the acknowledgement of what had arrived; then nothing more is sent
	drain(p.replies)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case at := <-p.replies:
			if at.Before(blockedAt.Add(50 * time.Millisecond)) {
				continue
			}
			gap := at.Sub(blockedAt)
			t.Logf("the download resumed %s after the block, path %s", gap.Round(time.Millisecond), p.path().Path)
			// 400 ms of silence, a keepalive's trip and the answer: a
			// bound generous for a loaded machine, well short of the 5 s
			// a handshake would have waited for.
			if gap > 3*time.Second {
				t.Errorf("resumed after %s, want well within 3 s", gap)
			}
			return
		case <-deadline:
			t.Fatalf("nothing arrived within 10 s of the block; state %+v", p.path())
		}
	}
}

func TestRelayRefusalIsReported(t *testing.T) {
	p := newPair(t, true, "a revoked token")
	p.ping()
	p.waitPath(relay.Relay, 10*time.Second)
	deadline := time.After(10 * time.Second)
	for !strings.Contains(p.path().RelayErr, "unknown or revoked token") {
		select {
		case <-p.changed:
		case <-deadline:
			t.Fatalf("relay error %q, want control's refusal", p.path().RelayErr)
		}
	}
	if p.gw.Streams() != 0 || p.path().RelayUp {
		t.Error("a refused device got a stream")
	}
}
