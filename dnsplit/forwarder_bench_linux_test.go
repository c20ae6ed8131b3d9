package dnsplit

import (
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkForwarder is one query through a real forwarder on loopback to
// a real upstream and back, from parallel clients each with its own socket.
// (The comparison with dnsmasq under dnsperf is dnsplit/bench.)
func BenchmarkForwarder(b *testing.B) {
	up := startDNS(b, "", serverBehaviour{answer: netip.MustParseAddr("192.0.2.1")})
	_, fwd := startForwarder(b, tableWith(nil, up.addr))
	q := new(dns.Msg)
	q.SetQuestion("www.example.test.", dns.TypeA)
	pkt, _ := q.Pack()
	b.ReportAllocs()
	b.SetParallelism(32) // many queries in flight, as under dnsperf
	b.ResetTimer()
	cpu0 := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("udp", fwd.String())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 512)
		for pb.Next() {
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(pkt); err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Read(buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
	// CPU time is what the machine's other load does not distort much:
	// it counts this process's forwarder, upstream and clients together.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkForwarderLatency is one client asking one query at a time:
// ns/op is the round trip through the forwarder; "direct" is the same
// client asking the upstream itself, so the difference is what the
// forwarder adds.
func BenchmarkForwarderLatency(b *testing.B) {
	up := startDNS(b, "", serverBehaviour{answer: netip.MustParseAddr("192.0.2.1")})
	_, fwd := startForwarder(b, tableWith(nil, up.addr))
	q := new(dns.Msg)
	q.SetQuestion("www.example.test.", dns.TypeA)
	pkt, _ := q.Pack()
	for _, target := range []struct {
		name string
		addr netip.AddrPort
	}{{"direct", up.addr}, {"forwarder", fwd}} {
		b.Run(target.name, func(b *testing.B) {
			c, err := net.Dial("udp", target.addr.String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 512)
			for b.Loop() {
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write(pkt); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
