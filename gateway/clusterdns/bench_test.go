package clusterdns

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkHandler measures the handler in-process as the server drives it:
// unpack the query, answer, pack the reply. Reported as queries/s.
func BenchmarkHandler(b *testing.B) {
	z, err := NewZone(srvAddr, domains)
	if err != nil {
		b.Fatal(err)
	}
	var h Handler
	h.SetZone(z)
	names := []string{"app.ky3.rjwrn.example.com.", "k8s.ky3.rjwrn.example.com.", "www.example.test."}
	var packets [][]byte
	for _, n := range names {
		p, _ := query(n, dns.TypeA).Pack()
		packets = append(packets, p)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &fakeWriter{remote: &net.UDPAddr{IP: net.IPv4(100, 96, 0, 2), Port: 5353}}
		i := 0
		for pb.Next() {
			req := new(dns.Msg)
			if err := req.Unpack(packets[i%len(packets)]); err != nil {
				b.Fatal(err)
			}
			h.ServeDNS(w, req)
			if _, err := w.out.Pack(); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}

// BenchmarkServerUDP measures the real server over loopback UDP, one query
// in flight per goroutine.
func BenchmarkServerUDP(b *testing.B) {
	s := startServer(b, domains)
	addr := s.Addr().String()
	p, _ := query("app.ky3.rjwrn.example.com.", dns.TypeA).Pack()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("udp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, 512)
		for pb.Next() {
			if _, err := c.Write(p); err != nil {
				b.Fatal(err)
			}
			if _, err := c.Read(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}
