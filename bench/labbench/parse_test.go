package labbench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestIperfMbps(t *testing.T) {
	if v, err := IperfMbps([]byte(`{"start":{},"end":{"sum_received":{"bits_per_second":312500000.5}}}`)); err != nil || math.Abs(v-312.5) > 1e-6 {
		t.Errorf("IperfMbps = %v, %v", v, err)
	}
	for _, bad := range []string{``, `{`, `{"end":{}}`, `{"error":"unable to connect to server"}`,
		`{"end":{"sum_received":{"bits_per_second":-1}}}`} {
		if _, err := IperfMbps([]byte(bad)); err == nil {
			t.Errorf("IperfMbps(%q) did not fail", bad)
		}
	}
	if _, err := IperfMbps([]byte(`{"error":"unable to connect to server: Connection refused"}`)); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("iperf3's own error is not passed on: %v", err)
	}
}

func TestPingTimes(t *testing.T) {
	out := `PING 198.51.100.31 (198.51.100.31) 56(84) bytes of data.
64 bytes from 198.51.100.31: icmp_seq=1 ttl=64 time=0.061 ms
64 bytes from 198.51.100.31: icmp_seq=2 ttl=64 time=1.20 ms
From 198.51.100.101 icmp_seq=3 Destination Host Unreachable
64 bytes from 198.51.100.31: icmp_seq=4 ttl=64 time=fast ms

--- 198.51.100.31 ping statistics ---
rtt min/avg/max/mdev = 0.061/0.630/1.200/0.569 ms
`
	if got := PingTimes(out); !slices.Equal(got, []float64{0.061, 1.2}) {
		t.Errorf("PingTimes = %v", got)
	}
}

func TestReportedConnectMs(t *testing.T) {
	for in, want := range map[string]float64{
		"xym is up: VPN server n1 at 198.51.100.31:32768 (100.100.2.1), handshake 0s ago\nConnected in 19 ms.\n": 19,
		"Connected in 7 ms": 7,
	} {
		if got, ok := ReportedConnectMs(in); !ok || got != want {
			t.Errorf("ReportedConnectMs(%q) = %v, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "Connected in 12.5 s.", "Connected in", "Connected in x ms."} {
		if _, ok := ReportedConnectMs(in); ok {
			t.Errorf("ReportedConnectMs(%q) found a time", in)
		}
	}
}

func TestLastHandshake(t *testing.T) {
	get := "private_key=00\nlisten_port=4000\npublic_key=ab\nendpoint=198.51.100.31:51999\nlast_handshake_time_sec=1700000000\nlast_handshake_time_nsec=250000000\ntx_bytes=148\nerrno=0\n"
	at, ok := LastHandshake(get)
	if !ok || !at.Equal(time.Unix(1700000000, 250000000)) {
		t.Errorf("LastHandshake = %v, %v", at, ok)
	}
	if _, ok := LastHandshake("public_key=ab\nlast_handshake_time_sec=0\nlast_handshake_time_nsec=0\n"); ok {
		t.Error("a peer with no handshake has one")
	}
	if _, ok := LastHandshake("private_key=00\nerrno=0\n"); ok {
		t.Error("a device with no peer has a handshake")
	}
}

// The parsers read other programs' output: whatever they get, they return
// sane numbers or an error, never a panic.
func TestIperfIntervals(t *testing.T) {
	v, err := IperfIntervals([]byte(`{"intervals":[{"sum":{"bits_per_second":5e8}},{"sum":{"bits_per_second":1.5e9}}],"end":{}}`))
	if err != nil || len(v) != 2 || v[0] != 500 || v[1] != 1500 {
		t.Errorf("IperfIntervals = %v, %v", v, err)
	}
	for _, bad := range []string{``, `{}`, `{"intervals":[]}`, `{"error":"refused"}`, `{"intervals":[{"sum":{"bits_per_second":-1}}]}`} {
		if _, err := IperfIntervals([]byte(bad)); err == nil {
			t.Errorf("IperfIntervals(%q) did not fail", bad)
		}
	}
}

func FuzzIperfMbps(f *testing.F) {
	f.Add([]byte(`{"end":{"sum_received":{"bits_per_second":312500000.5}}}`))
	f.Add([]byte(`{"error":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := IperfMbps(b)
		if err == nil && (v <= 0 || math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Errorf("IperfMbps gave %v without an error", v)
		}
	})
}

func FuzzToolOutput(f *testing.F) {
	f.Add("64 bytes from 198.51.100.31: icmp_seq=1 ttl=64 time=0.061 ms\n")
	f.Add("Connected in 19 ms.\n")
	f.Add("last_handshake_time_sec=1\nlast_handshake_time_nsec=2\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range PingTimes(s) {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("PingTimes gave %v", v)
			}
		}
		if v, ok := ReportedConnectMs(s); ok && (v < 0 || math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Errorf("ReportedConnectMs gave %v", v)
		}
		LastHandshake(s)
	})
}
