package wghost

import (
	"bytes"
	"encoding/hex"
	"net"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// getAnswer is what wireguard-go's IpcGetOperation writes for a device
// with two peers (keys in hex), one never handshaken.
const getAnswer = `private_key=e84b5a6d2717c1003a13b431570353dbaca9146cf150c5f8575680feba52027a
listen_port=51820
fwmark=0
public_key=b85996fecc9c7f1fc6d2572a76eda11d59bcb20be8e543b15ce4bd85a8e75a33
preshared_key=0000000000000000000000000000000000000000000000000000000000000000
protocol_version=1
endpoint=[abcd:23::33%2]:51820
last_handshake_time_sec=1700000000
last_handshake_time_nsec=5
tx_bytes=38333
rx_bytes=2224
persistent_keepalive_interval=25
allowed_ip=192.168.4.4/32
allowed_ip=10.0.0.0/8
public_key=58402e695ba1772b1cc9309755f043251ea77fdcf10fbe63989ceb7e19321376
protocol_version=1
endpoint=182.122.22.19:3233
last_handshake_time_sec=0
last_handshake_time_nsec=0
tx_bytes=0
rx_bytes=0
persistent_keepalive_interval=0
allowed_ip=fd00::/64
errno=0

`

func TestParseUAPI(t *testing.T) {
	d, err := parseUAPI(strings.NewReader(getAnswer))
	if err != nil {
		t.Fatal(err)
	}
	if d.ListenPort != 51820 || len(d.Peers) != 2 {
		t.Fatalf("device %+v", d)
	}
	p, q := d.Peers[0], d.Peers[1]
	if p.Endpoint.String() != "[abcd:23::33%2]:51820" || p.PersistentKeepaliveInterval != 25*time.Second ||
		!p.LastHandshakeTime.Equal(time.Unix(1700000000, 5)) || p.TransmitBytes != 38333 || p.ReceiveBytes != 2224 ||
		len(p.AllowedIPs) != 2 || p.AllowedIPs[1].String() != "10.0.0.0/8" || p.ProtocolVersion != 1 {
		t.Errorf("first peer %+v", p)
	}
	if !q.LastHandshakeTime.IsZero() || q.Endpoint.String() != "182.122.22.19:3233" || q.AllowedIPs[0].String() != "fd00::/64" {
		t.Errorf("second peer %+v: a peer never handshaken has the zero time", q)
	}
}

// TestParseUAPIRefuses: a malformed line is an error naming it.
func TestParseUAPIRefuses(t *testing.T) {
	for _, in := range []string{
		"listen_port=port\n",
		"private_key=abc\n",
		"public_key=zz" + strings.Repeat("0", 62) + "\n",
		"garbage\n",
		"public_key=" + strings.Repeat("0", 64) + "\nendpoint=nowhere\n",
		"public_key=" + strings.Repeat("0", 64) + "\nallowed_ip=10.0.0.1\n",
		"errno=2\n",
	} {
		if d, err := parseUAPI(strings.NewReader(in)); err == nil {
			t.Errorf("%q: parsed as %+v", in, d)
		}
	}
}

// TestWriteUAPI: a configuration written and read back by wireguard-go's
// own format keeps every field (what the peers' Diff sets).
func TestWriteUAPI(t *testing.T) {
	priv, _ := wgtypes.GeneratePrivateKey()
	pk := priv.PublicKey()
	port, ka := 41000, 25*time.Second
	var b bytes.Buffer
	writeUAPI(&b, wgtypes.Config{PrivateKey: &priv, ListenPort: &port, ReplacePeers: true, Peers: []wgtypes.PeerConfig{
		{PublicKey: pk, Endpoint: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41001}, PersistentKeepaliveInterval: &ka,
			ReplaceAllowedIPs: true, AllowedIPs: []net.IPNet{{IP: net.IPv4(10, 99, 0, 2).To4(), Mask: net.CIDRMask(32, 32)}}},
		{PublicKey: priv.PublicKey(), Remove: true},
	}})
	want := "private_key=" + hexOf(priv) + "\nlisten_port=41000\nreplace_peers=true\n" +
		"public_key=" + hexOf(pk) + "\nendpoint=127.0.0.1:41001\npersistent_keepalive_interval=25\nreplace_allowed_ips=true\nallowed_ip=10.99.0.2/32\n" +
		"public_key=" + hexOf(pk) + "\nremove=true\n"
	if b.String() != want {
		t.Errorf("wrote\n%s\nwant\n%s", b.String(), want)
	}
}

func hexOf(k wgtypes.Key) string { return hex.EncodeToString(k[:]) }

// FuzzParseUAPI: whatever the text, the parser returns a device or an
// error and never panics; a device's peers each have their key.
func FuzzParseUAPI(f *testing.F) {
	f.Add(getAnswer)
	f.Add("public_key=" + strings.Repeat("0", 64) + "\nlast_handshake_time_sec=-1\n")
	f.Add("errno=0\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		d, err := parseUAPI(strings.NewReader(in))
		if err == nil && strings.Count(in, "public_key=") < len(d.Peers) {
			t.Errorf("%d peers from %q", len(d.Peers), in)
		}
	})
}
