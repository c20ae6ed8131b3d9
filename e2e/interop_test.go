//go:build !windows

package e2e

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/auth/formlogin"
)

// laptopNet is an HTTP client for a sign-in run from this test process as
// if on the laptop: connections to control start inside the laptop's
// namespace, while the loopback redirect goes to the sign-in's listener in
// this process (auth.Flow listens on 127.0.0.1 here).
func (w *world) laptopNet(host string) *http.Client {
	hc, err := w.lab.HTTPClient(host)
	if err != nil {
		w.t.Fatal(err)
	}
	tr := hc.Transport.(*http.Transport)
	inLab := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().IsLoopback() {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		return inLab(ctx, network, addr)
	}
	return hc
}

type formOpener struct {
	ctx            context.Context
	hc             *http.Client
	user, password string
	t              *testing.T
}

func (o formOpener) Open(u string) error {
	go func() {
		if _, err := formlogin.Login(o.ctx, o.hc, u, o.user, o.password); err != nil {
			o.t.Errorf("login form: %v", err)
		}
	}()
	return nil
}

// TestInteropStockPeer: a stock wireguard-go + wg peer on a laptop,
// configured from control's answer for a device registered with its
// public key (the RunOS daemon plays no part), handshakes with
// runos-gateway and reaches the node's page.
func TestInteropStockPeer(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Sign in through the login form with PKCE, from here.
	hc := w.laptopNet(laptop)
	flow := &auth.Flow{Issuer: w.env.APIURL, ClientID: api.ClientCLI, HTTPClient: hc,
		Opener: formOpener{ctx: ctx, hc: hc, user: w.env.User, password: w.env.Password, t: t},
		Out:    testWriter{t}}
	tok, err := flow.SignInBrowser(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Register a stock peer's public key and join ky3.
	key, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	c, err := w.lab.APIClient(laptop, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := c.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: key.PublicKey().String(), Name: "stock-peer", OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.JoinCluster(ctx, dev.ID, "ky3")
	if err != nil {
		t.Fatal(err)
	}
	vpn := cc.VPN
	if vpn.PublicKey == "" || vpn.Endpoint != "10.77.0.21:32768" || vpn.Subnet == "" || dev.Address == "" {
		// A join may answer before the server's key is known; the map has it then.
		t.Fatalf("join answer: device %+v, vpn %+v", dev, vpn)
	}

	// The stock peer: Debian's wireguard-go, configured with wg.
	iface := "wgi" + strings.ToLower(key.PublicKey().String()[:4])
	iface = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return 'x'
	}, iface)
	start, err := w.lab.Command(context.Background(), laptop, nil, "wireguard-go", "-f", iface)
	if err != nil {
		t.Fatal(err)
	}
	start.Stdout, start.Stderr = testWriter{t}, testWriter{t}
	if err := start.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = start.Process.Signal(syscall.SIGTERM)
		_ = start.Wait()
	})
	keyFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyFile, []byte(key.String()+"\n"), 0o600)
	w.waitFor(10*time.Second, "wireguard-go's UAPI socket", func() bool {
		_, err := w.run(laptop, nil, "wg", "show", iface)
		return err == nil
	})
	w.must(laptop, nil, "wg", "set", iface, "private-key", keyFile,
		"peer", vpn.PublicKey, "endpoint", vpn.Endpoint, "allowed-ips", vpn.Subnet, "persistent-keepalive", "1")
	w.must(laptop, nil, "ip", "addr", "add", dev.Address+"/32", "dev", iface)
	w.must(laptop, nil, "ip", "link", "set", iface, "up")
	w.must(laptop, nil, "ip", "route", "add", vpn.Subnet, "dev", iface)

	w.waitFor(15*time.Second, "a handshake between the stock peer and runos-gateway", func() bool {
		out, err := w.run(laptop, nil, "wg", "show", iface, "latest-handshakes")
		return err == nil && strings.Contains(out, vpn.PublicKey) && !strings.Contains(out, vpn.PublicKey+"\t0")
	})
	if out, err := w.page(laptop, "http://"+vpn.Address+"/"); err != nil || !strings.Contains(out, "cluster=ky3 node=n1") {
		t.Errorf("page through the stock peer: %q %v", out, err)
	}
	if peers := w.gatewayPeers("ky3-n1"); !strings.Contains(peers, key.PublicKey().String()) {
		t.Errorf("runos-gateway does not list the stock peer:\n%s", peers)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
