package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// probes are packets at the edges the seeds and random policies use.
var probes = func() []Packet {
	var out []Packet
	for _, a := range []string{"0.0.0.0", "10.0.0.0", "10.0.0.7", "10.0.0.255", "10.96.0.20", "255.255.255.255", "::", "fd00::20", "::ffff:10.0.0.7", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		for _, pr := range []Proto{TCP, UDP} {
			for _, port := range []uint16{0, 1, 5, 53, 5432, 65535} {
				out = append(out, Packet{Addr: netip.MustParseAddr(a), Proto: pr, Port: port})
			}
		}
		out = append(out, Packet{Addr: netip.MustParseAddr(a), Proto: ICMP}, Packet{Addr: netip.MustParseAddr(a)})
	}
	return out
}()

func TestFilterMatchesTheTable(t *testing.T) {
	p := mustLoad(t, teamPolicy)
	carl := Subject{User: "carl@example.com"}
	f := Compile(p, carl, "ky3")
	for _, c := range []struct {
		k     *Packet
		allow bool
		line  int
	}{
		{pkt("10.96.0.20", TCP, 5432), true, 9},
		{pkt("10.96.0.20", TCP, 5433), false, 0},
		{pkt("10.96.1.128", TCP, 8080), true, 10},
		{pkt("10.96.1.128", UDP, 8080), false, 0},
		{pkt("fd00::20", UDP, 53), true, 10},
		{pkt("10.96.2.1", ICMP, 0), true, 10},
		{pkt("10.5.5.5", TCP, 22), false, 0}, // dan's and sre's rule, not carl's
	} {
		if ok, line := f.Check(*c.k); ok != c.allow || line != c.line {
			t.Errorf("Check(%s) = %v by line %d, want %v by line %d", c.k, ok, line, c.allow, c.line)
		}
	}
}

// TestFilterAgreesWithDecide compiles random policies over a small space
// of addresses and ports, with overlapping prefixes and ranges, and asks
// both every question in it.
func TestFilterAgreesWithDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	addrs := []string{"10.0.0.0", "10.0.0.1", "10.0.0.6", "10.0.0.7", "10.0.0.8", "10.0.0.255", "10.0.1.0", "fd00::", "fd00::7", "fd00::ff", "fd00::100"}
	dest := func() string {
		a := []string{"*", "10.0.0.7", "10.0.0.0/24", "10.0.0.0/29", "10.0.0.8/30", "0.0.0.0/0", "fd00::/120", "[fd00::7]", "::/0"}[rng.IntN(9)]
		if rng.IntN(2) == 0 {
			if strings.Contains(a, ":") && !strings.HasPrefix(a, "[") {
				a = "[" + a + "]"
			}
			lo := 1 + rng.IntN(8)
			a += fmt.Sprintf(":%d-%d", lo, lo+rng.IntN(4))
		}
		return a + []string{"", "", "/tcp", "/udp", "/icmp"}[rng.IntN(5)]
	}
	for round := range 200 {
		var b strings.Builder
		b.WriteString("version 1\n")
		for range 1 + rng.IntN(6) {
			var ds []string
			for range 1 + rng.IntN(3) {
				d := dest()
				if strings.HasSuffix(d, "/icmp") && strings.Contains(d, "-") {
					d = strings.TrimSuffix(d, "/icmp")
				}
				ds = append(ds, d)
			}
			who := []string{"*", "group:g", "group:h", "user:x@y.z"}[rng.IntN(4)]
			fmt.Fprintf(&b, "allow %s -> %s: %s\n", who, []string{"ky3", "*", "xym"}[rng.IntN(3)], strings.Join(ds, ", "))
		}
		p, err := Load([]byte(b.String()), Known{Clusters: []string{"ky3", "xym"}, Groups: []string{"g", "h"}})
		if err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, b.String())
		}
		s := Subject{User: "x@y.z", Groups: []string{"g"}}
		f := Compile(p, s, "ky3")
		for _, a := range addrs {
			for _, pr := range []Proto{TCP, UDP, ICMP, AnyProto} {
				for port := range uint16(14) {
					k := Packet{Addr: netip.MustParseAddr(a), Proto: pr, Port: port}
					d := p.Decide(s, Query{Cluster: "ky3", Packet: &k})
					ok, line := f.Check(k)
					if ok != d.Allow || ok && line != d.Rule.Line {
						t.Fatalf("round %d, %s: filter %v by line %d, Decide %s\n%s", round, k, ok, line, d.Reason, b.String())
					}
					if vok, vline := f.Verdict(k); vok != ok || ok && vline != line || !ok && vline != nearest(p, s, k) {
						t.Fatalf("round %d, %s: verdict %v by line %d, want %v by line %d\n%s", round, k, vok, vline, ok, nearest(p, s, k), b.String())
					}
				}
			}
		}
	}
}

// nearest is the line a refused packet is counted against, found the
// slow way: the first of the subject's allow rules in ky3 with a
// destination holding the packet's address, whatever its ports (0: none).
func nearest(p *Policy, s Subject, k Packet) int {
	a := k.Addr.Unmap()
	for _, i := range p.applicable(s, "ky3") {
		for _, d := range p.Rules[i].Dests {
			if !d.Prefix.IsValid() || d.Prefix.Contains(a) {
				return p.Rules[i].Line
			}
		}
	}
	return 0
}

// TestVerdictNamesTheRuleNearest: a refused packet is counted against the
// first rule reaching its address (the wrong port or protocol), or against
// none when no rule reaches it.
func TestVerdictNamesTheRuleNearest(t *testing.T) {
	p, err := Load([]byte("version 1\nallow * -> ky3: 10.96.0.20:5432/tcp\nallow * -> ky3: 10.96.0.0/24:53/udp\nallow * -> ky3: *:443\n"), Known{Clusters: []string{"ky3"}})
	if err != nil {
		t.Fatal(err)
	}
	f := Compile(p, Subject{User: "x@y.z"}, "ky3")
	for _, c := range []struct {
		k     Packet
		allow bool
		line  int
	}{
		{Packet{Addr: netip.MustParseAddr("10.96.0.20"), Proto: TCP, Port: 5432}, true, 2},
		{Packet{Addr: netip.MustParseAddr("10.96.0.20"), Proto: TCP, Port: 22}, false, 2},
		{Packet{Addr: netip.MustParseAddr("10.96.0.21"), Proto: TCP, Port: 22}, false, 3},
		{Packet{Addr: netip.MustParseAddr("10.97.0.1"), Proto: TCP, Port: 22}, false, 4},
		{Packet{Addr: netip.MustParseAddr("10.97.0.1"), Proto: TCP, Port: 443}, true, 4},
	} {
		if allow, line := f.Verdict(c.k); allow != c.allow || line != c.line {
			t.Errorf("%s: %v by line %d, want %v by line %d", c.k, allow, line, c.allow, c.line)
		}
	}
	narrow, err := Load([]byte("version 1\nallow * -> ky3: 10.96.0.20:5432/tcp\n"), Known{Clusters: []string{"ky3"}})
	if err != nil {
		t.Fatal(err)
	}
	k := Packet{Addr: netip.MustParseAddr("10.96.0.21"), Proto: TCP, Port: 5432}
	if allow, line := Compile(narrow, Subject{User: "x@y.z"}, "ky3").Verdict(k); allow || line != 0 {
		t.Errorf("an address no rule reaches: %v by line %d, want the default deny (0)", allow, line)
	}
}

// bigPolicy is 1,000 allow rules over ten groups, each a /24 with a TCP
// port and one more address with every port, as a large team's policy
// might be.
func bigPolicy(tb testing.TB) (*Policy, Subject) {
	var b strings.Builder
	b.WriteString("version 1\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "allow group:g%d -> ky3: 10.%d.%d.0/24:%d/tcp, 172.16.%d.%d\n", i%10, i/250, i%250, 1000+i, i/256, i%256)
	}
	groups := make([]string, 10)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%d", i)
	}
	p, err := Load([]byte(b.String()), Known{Clusters: []string{"ky3"}, Groups: groups})
	if err != nil {
		tb.Fatal(err)
	}
	return p, Subject{User: "x@y.z", Groups: groups}
}

func benchPackets() []Packet {
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([]Packet, 1024)
	for i := range out {
		n := rng.IntN(1000)
		switch rng.IntN(3) {
		case 0: // allowed by its /24's rule
			out[i] = Packet{Addr: netip.AddrFrom4([4]byte{10, byte(n / 250), byte(n % 250), byte(rng.IntN(256))}), Proto: TCP, Port: uint16(1000 + n)}
		case 1: // allowed by the single address
			out[i] = Packet{Addr: netip.AddrFrom4([4]byte{172, 16, byte(n / 256), byte(n % 256)}), Proto: UDP, Port: uint16(rng.IntN(65536))}
		default: // refused: the wrong port
			out[i] = Packet{Addr: netip.AddrFrom4([4]byte{10, byte(n / 250), byte(n % 250), 1}), Proto: TCP, Port: 80}
		}
	}
	return out
}

func BenchmarkFilterCheck1000Rules(b *testing.B) {
	p, s := bigPolicy(b)
	f := Compile(p, s, "ky3")
	ks := benchPackets()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		f.Check(ks[i%len(ks)])
	}
}

func BenchmarkDecide1000Rules(b *testing.B) {
	p, s := bigPolicy(b)
	ks := benchPackets()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p.Decide(s, Query{Cluster: "ky3", Packet: &ks[i%len(ks)]})
	}
}

func BenchmarkCompile1000Rules(b *testing.B) {
	p, s := bigPolicy(b)
	for b.Loop() {
		Compile(p, s, "ky3")
	}
}

// BenchmarkCompileWideRules: 1,000 rules for a port on every address and
// 1,000 for every port of one address, each span of the address space
// covered by a thousand entries — the worst shape for the compiler.
func BenchmarkCompileWideRules(b *testing.B) {
	var src strings.Builder
	src.WriteString("version 1\n")
	for i := range 1000 {
		fmt.Fprintf(&src, "allow * -> ky3: *:%d/tcp\nallow * -> ky3: 10.1.%d.%d\n", 1000+i, i/256, i%256)
	}
	p, err := Load([]byte(src.String()), Known{Clusters: []string{"ky3"}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		Compile(p, Subject{User: "x@y.z"}, "ky3")
	}
}

// BenchmarkFilterCheckByPosition: a packet allowed by the first of 1,000
// rules for the subject, by the last, and refused by all: the check is
// two binary searches, so the three cost the same (issue 23's gateway
// throughput with the allowing rule late).
func BenchmarkFilterCheckByPosition(b *testing.B) {
	var src strings.Builder
	src.WriteString("version 1\n")
	for i := range 1000 {
		fmt.Fprintf(&src, "allow * -> ky3: 10.%d.%d.0/24:%d-%d/tcp, 172.16.%d.%d:53/udp\n", 96+i/250, i%250, 1000+i, 1010+i, i/256, i%256)
	}
	p, err := Load([]byte(src.String()), Known{Clusters: []string{"ky3"}})
	if err != nil {
		b.Fatal(err)
	}
	f := Compile(p, Subject{User: "x@y.z"}, "ky3")
	for _, c := range []struct {
		name string
		k    Packet
		line int
	}{
		{"first", Packet{Addr: netip.MustParseAddr("10.96.0.9"), Proto: TCP, Port: 1005}, 2},
		{"last", Packet{Addr: netip.MustParseAddr("10.99.249.9"), Proto: TCP, Port: 1999}, 1001},
		{"refused", Packet{Addr: netip.MustParseAddr("10.99.249.9"), Proto: TCP, Port: 80}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			if _, line := f.Check(c.k); line != c.line {
				b.Fatalf("decided by line %d, want %d", line, c.line)
			}
			for b.Loop() {
				f.Check(c.k)
			}
		})
	}
}
