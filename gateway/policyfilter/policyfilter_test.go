package policyfilter

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.zx2c4.com/wireguard/tun"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/policy"
)

// packet is an IP packet from src to dst: protocol proto and, for TCP and
// UDP, destination port port.
func packet(src, dst string, proto uint8, port uint16) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	var b []byte
	if s.Is4() {
		b = make([]byte, 20, 28)
		b[0], b[9] = 0x45, proto
		copy(b[12:16], s.AsSlice())
		copy(b[16:20], d.AsSlice())
	} else {
		b = make([]byte, 40, 48)
		b[0], b[6] = 0x60, proto
		copy(b[8:24], s.AsSlice())
		copy(b[24:40], d.AsSlice())
	}
	l4 := make([]byte, 8)
	binary.BigEndian.PutUint16(l4[0:2], 40000)
	binary.BigEndian.PutUint16(l4[2:4], port)
	return append(b, l4...)
}

// mapped is ky3's mapped range (gateway/reach): 10.96.0.20 is
// fd52:4f53:5600:1::a60:14 there.
var mapped = netip.MustParsePrefix("fd52:4f53:5600:1::/96")

const (
	ada     = "100.96.0.2" // in oncall: everything in ky3
	bob     = "100.96.0.3" // Postgres on one address only
	service = "100.100.1.1"
)

func filterFor(t *testing.T) *Filter {
	t.Helper()
	p, err := policy.Load([]byte("version 1\ngroup oncall: ada@x\nallow group:oncall -> ky3: *\nallow user:bob@x -> ky3: 10.96.0.20:5432\n"),
		policy.Known{Clusters: []string{"ky3"}})
	if err != nil {
		t.Fatal(err)
	}
	var f Filter
	f.Set(policy.CompileDevices(p, "ky3", []policy.Device{
		{Addr: netip.MustParseAddr(ada), User: policy.Subject{User: "ada@x"}},
		{Addr: netip.MustParseAddr(bob), User: policy.Subject{User: "bob@x"}},
	}), netip.MustParseAddr(service), mapped)
	return &f
}

func TestAllow(t *testing.T) {
	f := filterFor(t)
	for _, c := range []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"oncall reaches anything", packet(ada, "10.96.0.99", 6, 22), true},
		{"bob reaches Postgres", packet(bob, "10.96.0.20", 6, 5432), true},
		{"bob not another port", packet(bob, "10.96.0.20", 6, 22), false},
		{"bob not ICMP to it", packet(bob, "10.96.0.20", 1, 0), false},
		{"bob not another address", packet(bob, "10.96.0.21", 6, 5432), false},
		{"bob asks the cluster DNS", packet(bob, service, 17, 53), true},
		{"bob pings the VPN server", packet(bob, service, 1, 0), true},
		{"bob not the server's web page", packet(bob, service, 6, 80), false},
		{"no device of the cluster", packet("100.96.0.9", "10.96.0.20", 6, 5432), false},
		{"IPv6 from no device", packet("fd00::1", "fd00::2", 6, 5432), false},
		{"bob reaches Postgres by its mapped address", packet(api.DeviceAddr6(netip.MustParseAddr(bob)).String(), "fd52:4f53:5600:1::a60:14", 6, 5432), true},
		{"bob not another mapped address", packet(api.DeviceAddr6(netip.MustParseAddr(bob)).String(), "fd52:4f53:5600:1::a60:15", 6, 5432), false},
		{"bob not in another cluster's mapped range", packet(api.DeviceAddr6(netip.MustParseAddr(bob)).String(), "fd52:4f53:5600:2::a60:14", 6, 5432), false},
		{"not IP", []byte{0x00, 0x01}, false},
		{"a short IPv4 header", packet(bob, "10.96.0.20", 6, 5432)[:12], false},
	} {
		if got := f.Allow(c.pkt); got != c.want {
			t.Errorf("%s: allow = %v, want %v", c.name, got, c.want)
		}
	}
	var open Filter
	if !open.Allow([]byte{0}) {
		t.Error("a filter with no policy refused a packet")
	}
	open.Set(nil, netip.MustParseAddr(service), netip.Prefix{})
	if !open.Allow(packet(bob, "10.96.0.21", 6, 22)) {
		t.Error("an account without a policy refused a packet")
	}
}

// TestAllowAllocatesNothing: a packet's check, IPv4 or through a mapped
// range, allocates nothing; it runs for every packet a device sends.
func TestAllowAllocatesNothing(t *testing.T) {
	f := filterFor(t)
	for name, pkt := range map[string][]byte{
		"IPv4":           packet(bob, "10.96.0.20", 6, 5432),
		"IPv4 refused":   packet(bob, "10.96.0.21", 6, 5432),
		"mapped":         packet(api.DeviceAddr6(netip.MustParseAddr(bob)).String(), "fd52:4f53:5600:1::a60:14", 6, 5432),
		"another range":  packet(api.DeviceAddr6(netip.MustParseAddr(bob)).String(), "fd52:4f53:5600:2::a60:14", 6, 5432),
		"from no device": packet("fd00::1", "fd00::2", 6, 5432),
	} {
		if n := testing.AllocsPerRun(100, func() { f.Allow(pkt) }); n != 0 {
			t.Errorf("%s: %v allocations per check, want 0", name, n)
		}
	}
}

// recordTUN is a TUN that keeps what is written to it.
type recordTUN struct {
	tun.Device
	got [][]byte
}

func (r *recordTUN) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		r.got = append(r.got, b[offset:])
	}
	return len(bufs), nil
}

func TestWriteDropsRefusedPackets(t *testing.T) {
	f := filterFor(t)
	drops := 0
	f.Dropped = func() { drops++ }
	rec := &recordTUN{}
	dev := f.Wrap(rec)
	const off = 16
	in := [][]byte{
		packet(ada, "10.96.0.5", 6, 443),
		packet(bob, "10.96.0.20", 6, 22), // refused
		packet(bob, "10.96.0.20", 6, 5432),
		packet(bob, "10.96.0.21", 6, 5432), // refused
	}
	bufs := make([][]byte, len(in))
	for i, p := range in {
		bufs[i] = append(make([]byte, off), p...)
	}
	n, err := dev.Write(bufs, off)
	if err != nil || n != len(in) {
		t.Fatalf("write = %d, %v; want %d", n, err, len(in))
	}
	if len(rec.got) != 2 || string(rec.got[0]) != string(in[0]) || string(rec.got[1]) != string(in[2]) {
		t.Fatalf("passed %d packets, want packets 0 and 2", len(rec.got))
	}
	if drops != 2 || f.DroppedPackets() != 2 {
		t.Fatalf("drops counted %d (%d), want 2", drops, f.DroppedPackets())
	}
	// All refused: nothing written, the batch still consumed.
	rec.got = nil
	if n, err := dev.Write(bufs[1:2], off); err != nil || n != 1 || len(rec.got) != 0 {
		t.Fatalf("a refused batch: %d, %v, passed %d", n, err, len(rec.got))
	}
}

// BenchmarkWrite1000Rules is the filter's cost per packet in the TUN's
// write path under a policy of 1,000 rules (one per user, 100 devices),
// next to BenchmarkWriteNoPolicy. 99 packets of 100 are refused: the
// path that counts a refusal.
func BenchmarkWrite1000Rules(b *testing.B) {
	benchWrite(b, filter1000(b), "10.96.0.40")
}

// BenchmarkWrite1000RulesAllowed is BenchmarkWrite1000Rules with every
// packet allowed (each device's to its own rule's address and port).
func BenchmarkWrite1000RulesAllowed(b *testing.B) {
	benchWrite(b, filter1000(b), "")
}

// filter1000 is the filter of 1,000 rules, one per user (user i reaches
// 10.96.i/250.i%250 on port 1000+i), and 100 devices of users 0, 10, 20 ….
func filter1000(b *testing.B) *Filter {
	var doc strings.Builder
	doc.WriteString("version 1\n")
	var devices []policy.Device
	for i := range 1000 {
		fmt.Fprintf(&doc, "allow user:u%d@x -> ky3: 10.96.%d.%d:%d\n", i, i/250, i%250, 1000+i)
	}
	for i := range 100 {
		devices = append(devices, policy.Device{Addr: netip.AddrFrom4([4]byte{100, 96, 0, byte(2 + i)}), User: policy.Subject{User: fmt.Sprintf("u%d@x", i*10)}})
	}
	p, err := policy.Load([]byte(doc.String()), policy.Known{Clusters: []string{"ky3"}})
	if err != nil {
		b.Fatal(err)
	}
	var f Filter
	f.Set(policy.CompileDevices(p, "ky3", devices), netip.MustParseAddr(service), netip.Prefix{})
	return &f
}

func BenchmarkWriteNoPolicy(b *testing.B) { benchWrite(b, &Filter{}, "10.96.0.40") }

// benchWrite writes batches of 128 packets from the 100 devices of
// filter1000, to dst ("": to each device's own rule's address).
func benchWrite(b *testing.B, f *Filter, dst string) {
	dev := f.Wrap(&discardTUN{})
	bufs := make([][]byte, 128)
	for i := range bufs {
		src := netip.AddrFrom4([4]byte{100, 96, 0, byte(2 + i%100)})
		to, u := dst, (i%100)*10
		if to == "" {
			to = netip.AddrFrom4([4]byte{10, 96, byte(u / 250), byte(u % 250)}).String()
		}
		bufs[i] = packet(src.String(), to, 6, uint16(1000+u))
	}
	for b.Loop() {
		if _, err := dev.Write(bufs, 0); err != nil {
			b.Fatal(err)
		}
	}
	if dst == "" && f.DroppedPackets() != 0 {
		b.Fatalf("%d packets refused, want every one allowed", f.DroppedPackets())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bufs)), "ns/packet")
}

type discardTUN struct{ tun.Device }

func (discardTUN) Write(bufs [][]byte, _ int) (int, error) { return len(bufs), nil }

// TestRefusalsCountedPerRule: a refused packet is counted against the
// rule that reaches its address but not its port, or against the default
// deny; a new version keeping a rule keeps its count, and a rule that left
// the policy keeps what it counted. Counting allocates nothing.
func TestRefusalsCountedPerRule(t *testing.T) {
	f := filterFor(t)
	dev := f.Wrap(&recordTUN{})
	write := func(pkts ...[]byte) {
		t.Helper()
		if n, err := dev.Write(pkts, 0); err != nil || n != len(pkts) {
			t.Fatalf("write = %d, %v", n, err)
		}
	}
	bobsRule := "allow user:bob@x -> ky3: 10.96.0.20:5432"
	write(packet(bob, "10.96.0.20", 6, 22), packet(bob, "10.96.0.20", 1, 0), // line 4's address, not its port or protocol
		packet(bob, "10.96.0.21", 6, 5432), packet("100.96.0.9", "10.96.0.20", 6, 5432), // no rule of bob's reaches it; no device
		packet(ada, "10.96.0.20", 6, 22), packet(bob, "10.96.0.20", 6, 5432)) // allowed
	want := []RuleDrops{{Line: 0, Rule: DefaultDeny, Packets: 2}, {Line: 4, Rule: bobsRule, Packets: 2}}
	if got := f.RuleDrops(); !slices.Equal(got, want) {
		t.Fatalf("refusals per rule = %+v, want %+v", got, want)
	}
	if f.DroppedPackets() != 4 {
		t.Errorf("refusals in all = %d, want 4", f.DroppedPackets())
	}

	set := func(doc string) {
		t.Helper()
		p, err := policy.Load([]byte(doc), policy.Known{Clusters: []string{"ky3"}})
		if err != nil {
			t.Fatal(err)
		}
		f.Set(policy.CompileDevices(p, "ky3", []policy.Device{{Addr: netip.MustParseAddr(bob), User: policy.Subject{User: "bob@x"}}}),
			netip.MustParseAddr(service), mapped)
	}
	set("version 2\ngroup oncall: ada@x\nallow group:oncall -> ky3: *\nallow user:bob@x -> ky3: 10.96.0.20:5432\n")
	write(packet(bob, "10.96.0.20", 6, 22))
	want[1].Packets = 3
	if got := f.RuleDrops(); !slices.Equal(got, want) {
		t.Fatalf("after a version keeping the rule = %+v, want %+v", got, want)
	}
	set("version 3\nallow user:bob@x -> ky3: 10.96.0.20:5433\n")
	write(packet(bob, "10.96.0.20", 6, 22))
	want = append(want[:1], RuleDrops{Line: 2, Rule: "allow user:bob@x -> ky3: 10.96.0.20:5433", Packets: 1}, want[1])
	if got := f.RuleDrops(); !slices.Equal(got, want) {
		t.Fatalf("after a version changing the rule = %+v, want %+v", got, want)
	}

	pkt := packet(bob, "10.96.0.20", 6, 22)
	if n := testing.AllocsPerRun(100, func() {
		c := f.cur.Load()
		_, line := verdict(c, pkt)
		c.refused(line)
	}); n != 0 {
		t.Errorf("%v allocations per refusal counted, want 0", n)
	}
}
