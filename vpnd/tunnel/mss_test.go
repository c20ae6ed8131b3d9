package tunnel

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/runos/vpn/vpnd/wgcfg"
)

// syn builds a TCP SYN from src to dst with the given options after the
// 20-byte header, checksums right.
func syn(src, dst netip.Addr, opts []byte) []byte {
	tcp := make([]byte, 20+len(opts))
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	tcp[12] = byte((20+len(opts))/4) << 4
	tcp[13] = 0x02 // SYN
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	copy(tcp[20:], opts)
	var pkt []byte
	if src.Is4() {
		pkt = make([]byte, 20, 20+len(tcp))
		pkt[0] = 0x45
		binary.BigEndian.PutUint16(pkt[2:], uint16(20+len(tcp)))
		pkt[8], pkt[9] = 64, 6
		copy(pkt[12:], src.AsSlice())
		copy(pkt[16:], dst.AsSlice())
	} else {
		pkt = make([]byte, 40, 40+len(tcp))
		pkt[0] = 0x60
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(tcp)))
		pkt[6], pkt[7] = 6, 64
		copy(pkt[8:], src.AsSlice())
		copy(pkt[24:], dst.AsSlice())
	}
	pkt = append(pkt, tcp...)
	setTCPChecksum(pkt)
	return pkt
}

// tcpSum is the one's-complement sum of the pseudo-header and segment.
func tcpSum(pkt []byte) uint16 {
	var src, dst, seg []byte
	if pkt[0]>>4 == 4 {
		src, dst, seg = pkt[12:16], pkt[16:20], pkt[int(pkt[0]&0xf)*4:]
	} else {
		src, dst, seg = pkt[8:24], pkt[24:40], pkt[40:]
	}
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src)
	add(dst)
	sum += 6 + uint32(len(seg))
	add(seg)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

func setTCPChecksum(pkt []byte) {
	off := 40
	if pkt[0]>>4 == 4 {
		off = int(pkt[0]&0xf) * 4
	}
	pkt[off+16], pkt[off+17] = 0, 0
	binary.BigEndian.PutUint16(pkt[off+16:], ^tcpSum(pkt))
}

func checksumOK(pkt []byte) bool { return tcpSum(pkt) == 0xffff }

func mssOf(pkt []byte) int {
	off := 40
	if pkt[0]>>4 == 4 {
		off = int(pkt[0]&0xf) * 4
	}
	tcp := pkt[off:]
	for i := 20; i < int(tcp[12]>>4)*4 && i < len(tcp); {
		switch tcp[i] {
		case 0:
			return 0
		case 1:
			i++
			continue
		}
		if i+1 >= len(tcp) || tcp[i+1] < 2 {
			return 0
		}
		if tcp[i] == 2 && i+4 <= len(tcp) {
			return int(binary.BigEndian.Uint16(tcp[i+2:]))
		}
		i += int(tcp[i+1])
	}
	return 0
}

var (
	v4a, v4b = netip.MustParseAddr("100.96.0.2"), netip.MustParseAddr("100.100.1.1")
	v6a, v6b = netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::1")
)

func TestClampMSS(t *testing.T) {
	mss := func(v uint16) []byte { return []byte{2, 4, byte(v >> 8), byte(v)} }
	for _, tc := range []struct {
		name    string
		pkt     []byte
		changed bool
		want    int
	}{
		{"IPv4 SYN, MSS first", syn(v4a, v4b, append(mss(1380), 1, 1, 4, 2)), true, 1160},
		{"IPv4 SYN, MSS after one no-op (odd offset)", syn(v4a, v4b, append([]byte{1}, append(mss(1380), 1, 1, 1)...)), true, 1160},
		{"IPv4 SYN, MSS already small", syn(v4a, v4b, mss(1000)), false, 1000},
		{"IPv6 SYN", syn(v6a, v6b, mss(1360)), true, 1140},
		{"no MSS option", syn(v4a, v4b, []byte{1, 1, 4, 2}), false, 0},
	} {
		pkt := tc.pkt
		if !checksumOK(pkt) {
			t.Fatalf("%s: the test's packet is wrong", tc.name)
		}
		if got := clampMSS(pkt, 1160); got != tc.changed {
			t.Errorf("%s: changed %v, want %v", tc.name, got, tc.changed)
		}
		if m := mssOf(pkt); m != tc.want {
			t.Errorf("%s: MSS %d, want %d", tc.name, m, tc.want)
		}
		if !checksumOK(pkt) {
			t.Errorf("%s: checksum wrong after clamping", tc.name)
		}
	}
	// Not a SYN: untouched.
	p := syn(v4a, v4b, mss(1380))
	p[33] = 0x10 // ACK
	setTCPChecksum(p)
	if clampMSS(p, 1160) || mssOf(p) != 1380 {
		t.Error("a non-SYN was clamped")
	}
}

func TestSetUplinkMTU(t *testing.T) {
	var c clampTUN
	for _, tc := range []struct{ uplink, want int }{{1500, 0}, {0, 0}, {1280, 1160}, {1400, 1280}, {100, 536}} {
		if got := c.setUplinkMTU(tc.uplink, DefaultMTU); got != tc.want {
			t.Errorf("uplink %d: MSS %d, want %d", tc.uplink, got, tc.want)
		}
	}
}

// FuzzClampMSS: packets come from the laptop's own stack and, decrypted,
// from the tunnel; whatever they hold, clamping never panics, never grows
// an MSS, and leaves a valid checksum valid.
func FuzzClampMSS(f *testing.F) {
	f.Add(syn(v4a, v4b, []byte{2, 4, 5, 0x64, 1, 1, 4, 2}))
	f.Add(syn(v6a, v6b, []byte{1, 2, 4, 5, 0x50, 1, 1, 1}))
	f.Add([]byte{0x45, 0, 0, 20})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		valid := len(pkt) >= 40 && (pkt[0]>>4 == 4 && len(pkt) >= int(pkt[0]&0xf)*4+20 || pkt[0]>>4 == 6 && len(pkt) >= 60)
		before := 0
		ok := false
		if valid {
			func() {
				defer func() { _ = recover() }()
				ok, before = checksumOK(pkt), mssOf(pkt)
			}()
		}
		changed := clampMSS(pkt, 1160)
		if changed {
			after := mssOf(pkt)
			if after > before || after > 1160 {
				t.Fatalf("MSS %d → %d", before, after)
			}
			if ok && !checksumOK(pkt) {
				t.Fatal("checksum broken")
			}
		}
	})
}

// TestClampFollowsThePathsToTheServers: the clamp is set for the smallest
// MTU on the routes to the peers' endpoints, not for another interface's
// smaller MTU (the monitor's fallback); the fallback stands where a route
// cannot be looked up or no endpoint is known; lookups happen again only
// when the endpoints change or the network does.
func TestClampFollowsThePathsToTheServers(t *testing.T) {
	routes := map[netip.Addr]int{netip.MustParseAddr("10.77.0.21"): 1500, netip.MustParseAddr("198.51.100.31"): 1280}
	lookups := 0
	e := &Engine{log: slog.New(slog.DiscardHandler), name: "wg1", mtu: DefaultMTU, clamp: &clampTUN{}, routeMTU: func(a netip.Addr) (int, error) {
		lookups++
		if m, ok := routes[a]; ok {
			return m, nil
		}
		return 0, errors.New("no route")
	}}
	peer := func(ep string) wgcfg.Peer { return wgcfg.Peer{Endpoint: netip.MustParseAddrPort(ep)} }
	step := func(name string, do func(), wantMSS int) {
		t.Helper()
		e.mu.Lock()
		do()
		e.mu.Unlock()
		if got := int(e.clamp.mss4.Load()); got != wantMSS {
			t.Errorf("%s: MSS %d, want %d", name, got, wantMSS)
		}
	}
	// Another VPN's interface at 1420 makes the monitor's guess 1420; the
	// route to the one server is a 1500-byte LAN: no clamp.
	e.uplinkMTU = 1420
	step("one server on the LAN", func() { e.applied.Peers = []wgcfg.Peer{peer("10.77.0.21:32768")}; e.reclamp(false) }, 0)
	step("the same endpoints again", func() { e.reclamp(false) }, 0)
	if lookups != 1 {
		t.Errorf("%d route lookups for unchanged endpoints, want 1", lookups)
	}
	// A second cluster behind a 1280-byte path: clamped for it.
	step("a server behind 1280", func() {
		e.applied.Peers = append(e.applied.Peers, peer("198.51.100.31:32768"))
		e.reclamp(false)
	}, 1280-outerOverhead-40)
	// A server whose route cannot be looked up: the fallback for it.
	step("an unknown route", func() {
		e.applied.Peers = []wgcfg.Peer{peer("10.77.0.21:32768"), peer("192.0.2.9:32768")}
		e.reclamp(false)
	}, 1420-outerOverhead-40)
	// No endpoint: the fallback; the network changed: looked up again.
	step("no endpoint", func() { e.applied.Peers = nil; e.reclamp(false) }, 1420-outerOverhead-40)
	e.applied.Peers = []wgcfg.Peer{peer("10.77.0.21:32768")}
	before := lookups
	e.SetUplinkMTU(1500)
	if lookups != before+1 || e.clamp.mss4.Load() != 0 {
		t.Errorf("after SetUplinkMTU: %d lookups (want %d), MSS %d", lookups, before+1, e.clamp.mss4.Load())
	}
	// No lookup at all (an OS without one): the fallback, as before.
	e.routeMTU = nil
	e.SetUplinkMTU(1280)
	if got := int(e.clamp.mss4.Load()); got != 1280-outerOverhead-40 {
		t.Errorf("without route lookups: MSS %d, want the uplink's %d", got, 1280-outerOverhead-40)
	}
}
