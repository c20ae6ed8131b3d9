package wghost

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// The host reads and configures its own device in process, in the UAPI's
// text (the format of wireguard-go's IpcGetOperation and IpcSetOperation,
// the one the UAPI socket speaks), instead of through the socket with
// wgctrl: wgctrl finds the socket by listing /var/run/wireguard and dials
// it for every call, 480 µs a read on this machine against 7 µs in
// process, and a connect reads and configures both ends several times on
// its way to the first handshake. The socket stays for `wg` and other
// tools. wgctrl's types are kept, so callers do not change.

// readDevice is the device as wgctrl's Device reads it. The public key is
// taken from key when the device's private key is key's (it always is:
// the host sets it once), as deriving it costs more than the rest of the
// read (a Curve25519 multiplication, ~60 µs).
func readDevice(dev *device.Device, name string, key *keyPair) (*wgtypes.Device, error) {
	var b bytes.Buffer
	if err := dev.IpcGetOperation(&b); err != nil {
		return nil, err
	}
	d, err := parseUAPI(&b)
	if err != nil {
		return nil, err
	}
	d.Name, d.Type = name, wgtypes.Userspace
	if key != nil && d.PrivateKey == key.private {
		d.PublicKey = key.public
	} else {
		d.PublicKey = d.PrivateKey.PublicKey()
	}
	return d, nil
}

// keyPair is a host's key and its public key, derived once.
type keyPair struct{ private, public wgtypes.Key }

// configure applies cfg to dev in one UAPI transaction. A refusal says
// its errno as wgctrl's did ("errno=N"): callers tell a port in use by it.
func configure(dev *device.Device, cfg wgtypes.Config) error {
	var b bytes.Buffer
	writeUAPI(&b, cfg)
	err := dev.IpcSetOperation(&b)
	var ie *device.IPCError
	if errors.As(err, &ie) {
		return fmt.Errorf("errno=%d: %w", ie.ErrorCode(), err)
	}
	return err
}

// parseUAPI reads a "get" answer: device fields, then each peer's from its
// public_key line on. An unknown key is skipped (a newer wireguard-go's);
// a malformed value is an error naming its line. The device's PublicKey
// is left for the caller (readDevice).
func parseUAPI(r io.Reader) (*wgtypes.Device, error) {
	d := &wgtypes.Device{}
	var p *wgtypes.Peer
	var hsSec, hsNsec int64
	endPeer := func() {
		if p != nil && (hsSec != 0 || hsNsec != 0) {
			p.LastHandshakeTime = time.Unix(hsSec, hsNsec)
		}
		hsSec, hsNsec = 0, 0
	}
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if line == "" {
			break // the answer's end
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("uapi line %d: %q is not key=value", n, line)
		}
		var err error
		switch {
		case k == "errno":
			var e int
			if e, err = strconv.Atoi(v); err == nil && e != 0 {
				return nil, fmt.Errorf("uapi: errno=%d", e)
			}
		case k == "public_key":
			endPeer()
			d.Peers = append(d.Peers, wgtypes.Peer{})
			p = &d.Peers[len(d.Peers)-1]
			p.PublicKey, err = hexKey(v)
		case p == nil:
			err = deviceField(d, k, v)
		default:
			err = peerField(p, &hsSec, &hsNsec, k, v)
		}
		if err != nil {
			return nil, fmt.Errorf("uapi line %d (%s): %w", n, k, err)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("uapi: %w", err)
	}
	endPeer()
	return d, nil
}

func deviceField(d *wgtypes.Device, k, v string) (err error) {
	switch k {
	case "private_key":
		d.PrivateKey, err = hexKey(v)
	case "listen_port":
		d.ListenPort, err = strconv.Atoi(v)
	case "fwmark":
		d.FirewallMark, err = strconv.Atoi(v)
	}
	return err
}

func peerField(p *wgtypes.Peer, hsSec, hsNsec *int64, k, v string) (err error) {
	switch k {
	case "preshared_key":
		p.PresharedKey, err = hexKey(v)
	case "endpoint":
		var ap netip.AddrPort
		if ap, err = netip.ParseAddrPort(v); err == nil {
			p.Endpoint = net.UDPAddrFromAddrPort(ap)
		}
	case "last_handshake_time_sec":
		*hsSec, err = strconv.ParseInt(v, 10, 64)
	case "last_handshake_time_nsec":
		*hsNsec, err = strconv.ParseInt(v, 10, 64)
	case "tx_bytes":
		p.TransmitBytes, err = strconv.ParseInt(v, 10, 64)
	case "rx_bytes":
		p.ReceiveBytes, err = strconv.ParseInt(v, 10, 64)
	case "persistent_keepalive_interval":
		var s int
		if s, err = strconv.Atoi(v); err == nil {
			p.PersistentKeepaliveInterval = time.Duration(s) * time.Second
		}
	case "allowed_ip":
		var pr netip.Prefix
		if pr, err = netip.ParsePrefix(v); err == nil {
			pr = pr.Masked()
			p.AllowedIPs = append(p.AllowedIPs, net.IPNet{IP: pr.Addr().AsSlice(), Mask: net.CIDRMask(pr.Bits(), pr.Addr().BitLen())})
		}
	case "protocol_version":
		p.ProtocolVersion, err = strconv.Atoi(v)
	}
	return err
}

func hexKey(v string) (wgtypes.Key, error) {
	var k wgtypes.Key
	if len(v) != 2*wgtypes.KeyLen {
		return k, fmt.Errorf("a key is %d hex digits, not %d", 2*wgtypes.KeyLen, len(v))
	}
	_, err := hex.Decode(k[:], []byte(v))
	return k, err
}

// writeUAPI writes cfg as a "set" transaction's body, as wgctrl does.
func writeUAPI(w *bytes.Buffer, cfg wgtypes.Config) {
	if cfg.PrivateKey != nil {
		fmt.Fprintf(w, "private_key=%s\n", hex.EncodeToString(cfg.PrivateKey[:]))
	}
	if cfg.ListenPort != nil {
		fmt.Fprintf(w, "listen_port=%d\n", *cfg.ListenPort)
	}
	if cfg.FirewallMark != nil {
		fmt.Fprintf(w, "fwmark=%d\n", *cfg.FirewallMark)
	}
	if cfg.ReplacePeers {
		w.WriteString("replace_peers=true\n")
	}
	for _, p := range cfg.Peers {
		fmt.Fprintf(w, "public_key=%s\n", hex.EncodeToString(p.PublicKey[:]))
		if p.Remove {
			w.WriteString("remove=true\n")
		}
		if p.UpdateOnly {
			w.WriteString("update_only=true\n")
		}
		if p.PresharedKey != nil {
			fmt.Fprintf(w, "preshared_key=%s\n", hex.EncodeToString(p.PresharedKey[:]))
		}
		if p.Endpoint != nil {
			fmt.Fprintf(w, "endpoint=%s\n", p.Endpoint.String())
		}
		if p.PersistentKeepaliveInterval != nil {
			fmt.Fprintf(w, "persistent_keepalive_interval=%d\n", int(p.PersistentKeepaliveInterval.Seconds()))
		}
		if p.ReplaceAllowedIPs {
			w.WriteString("replace_allowed_ips=true\n")
		}
		for _, ip := range p.AllowedIPs {
			fmt.Fprintf(w, "allowed_ip=%s\n", ip.String())
		}
	}
}
