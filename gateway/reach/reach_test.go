package reach

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
)

func testSpec(t *testing.T) Spec {
	t.Helper()
	m, _ := api.MappedRange(3)
	in := &api.ClusterInside{NodeNetwork: "10.10.0.0/24", PodRange: "10.244.0.0/16", ServiceRange: "10.96.0.0/12", Mapped: m.String()}
	s, err := SpecFor("wgvpn", netip.MustParseAddr("100.100.3.1"), netip.MustParsePrefix("100.96.0.0/16"), in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTarget(t *testing.T) {
	s := testSpec(t)
	for dst, want := range map[string]string{
		"10.96.0.20:80":                  "10.96.0.20:80",
		"[fd52:4f53:5600:3::a60:14]:80":  "10.96.0.20:80",
		"[fd52:4f53:5600:3::a0a:2]:22":   "10.10.0.2:22",
		"[::ffff:10.244.2.10]:8080":      "10.244.2.10:8080",
		"10.77.0.1:80":                   "",
		"[fd52:4f53:5600:4::a60:14]:80":  "", // another cluster's range
		"[fd52:4f53:5600:3::a4d:1]:80":   "", // mapped, but not declared
		"[2001:db8::1]:443":              "",
		"[fd52:4f53:5600::6460:2]:80":    "", // a device
		"[fd52:4f53:5600:3:1::a60:14]:1": "", // outside the /96
	} {
		got, err := s.Target(netip.MustParseAddrPort(dst))
		if want == "" {
			if err == nil {
				t.Errorf("%s → %s, want refused", dst, got)
			}
			continue
		}
		if err != nil || got.String() != want {
			t.Errorf("%s → %s, %v; want %s", dst, got, err, want)
		}
	}
}

func FuzzTarget(f *testing.F) {
	f.Add([]byte{10, 96, 0, 20}, uint16(80), true)
	f.Add([]byte{192, 168, 1, 1}, uint16(443), false)
	f.Fuzz(func(t *testing.T, v4 []byte, port uint16, mapped bool) {
		if len(v4) != 4 {
			return
		}
		s := testSpec(t)
		a := netip.AddrFrom4([4]byte(v4))
		dst := a
		if mapped {
			dst = api.MappedAddr(s.Mapped, a)
		}
		got, err := s.Target(netip.AddrPortFrom(dst, port))
		declared := false
		for _, p := range s.Prefixes {
			declared = declared || p.Contains(a)
		}
		if declared != (err == nil) {
			t.Fatalf("%s (declared %v): %s, %v", dst, declared, got, err)
		}
		if err == nil && got != netip.AddrPortFrom(a, port) {
			t.Fatalf("%s → %s, want %s:%d", dst, got, a, port)
		}
	})
}

func TestRuleset(t *testing.T) {
	r := Rules(testSpec(t), Ports{TCP4: 40001, TCP6: 40002, UDP4: 40003, UDP6: 40004}).String()
	for _, want := range []string{
		"table inet runos_reach {",
		"counter protocol {",
		"set inside {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\telements = { 10.10.0.0/24, 10.96.0.0/12, 10.244.0.0/16 }",
		"elements = { fd52:4f53:5600:3::a0a:0/120, fd52:4f53:5600:3::a60:0/108, fd52:4f53:5600:3::af4:0/112 }",
		"type filter hook prerouting priority mangle; policy accept;",
		`iifname != "wgvpn" accept`,
		"ip daddr 100.100.3.1 accept",
		"ip daddr @inside meta l4proto tcp tproxy ip to :40001 meta mark set 0x52530001 accept",
		"ip6 daddr @mapped meta l4proto tcp tproxy ip6 to :40002 meta mark set 0x52530001 accept",
		"ip daddr @inside meta l4proto udp tproxy ip to :40003 meta mark set 0x52530001 accept",
		"ip6 daddr @mapped meta l4proto udp tproxy ip6 to :40004",
		`iifname "wgvpn" ip daddr @inside meta l4proto { tcp, udp } notrack`,
		`oifname "wgvpn" ip6 saddr @mapped meta l4proto { tcp, udp } notrack`,
		"ip saddr 100.96.0.0/16 ip daddr @inside icmp type echo-request accept",
		`ip6 daddr @mapped counter name "protocol" drop`,
		`ip daddr @inside counter name "protocol" drop`,
		`ip daddr 100.96.0.0/16 counter name "device_to_device" drop`,
		`fib daddr type local counter name "node" drop`,
		`counter name "undeclared" drop`,
		"type nat hook postrouting priority srcnat; policy accept;\n\t\tip saddr 100.96.0.0/16 ip daddr @inside meta l4proto icmp masquerade",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, r)
		}
	}
	for _, order := range [][2]string{
		{"tproxy", "fib daddr"},       // the node's own internal address is forwarded, not dropped
		{"echo-request", "fib daddr"}, // and answers ping
		{"echo-request", `ip daddr @inside counter name "protocol"`},
	} {
		if strings.Index(r, order[0]) > strings.Index(r, order[1]) {
			t.Errorf("%q comes after %q:\n%s", order[0], order[1], r)
		}
	}
}

// Prefixes one of which holds another make one element: an interval set
// refuses overlaps.
func TestDisjoint(t *testing.T) {
	got := disjoint([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("192.168.0.7/16")})
	if fmt.Sprint(got) != "[10.0.0.0/8 192.168.0.0/16]" {
		t.Errorf("disjoint = %v", got)
	}
}
