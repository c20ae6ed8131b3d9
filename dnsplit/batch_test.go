package dnsplit

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestPacketReaderBatches: the datagrams queued on a socket come back in
// one read on Linux (one at a time elsewhere), in order, each with its
// sender; one longer than the buffer is marked truncated; IPv4 and IPv6.
func TestPacketReaderBatches(t *testing.T) {
	for _, network := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(network, func(t *testing.T) {
			pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(network)))
			if err != nil {
				t.Skipf("no %s here: %v", network, err)
			}
			defer pc.Close()
			to := pc.LocalAddr().(*net.UDPAddr)
			cl, err := net.DialUDP("udp", nil, to)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			const size = 64
			rd := newPacketReader(pc, 4, size)
			sent := [][]byte{[]byte("one"), []byte("two"), bytes.Repeat([]byte("x"), size+10), []byte("four"), []byte("five")}
			for _, b := range sent {
				if _, err := cl.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(50 * time.Millisecond) // all five queued before the first read
			var got []datagram
			reads := 0
			for len(got) < len(sent) {
				ds, err := rd.read()
				if err != nil {
					t.Fatal(err)
				}
				reads++
				for _, d := range ds {
					d.b = bytes.Clone(d.b)
					got = append(got, d)
				}
			}
			if runtime.GOOS == "linux" && reads != 2 {
				t.Errorf("five queued datagrams took %d reads of a batch of 4, want 2", reads)
			}
			from := netip.MustParseAddrPort(cl.LocalAddr().String())
			for i, d := range got {
				if d.from.Addr().Unmap() != from.Addr().Unmap() || d.from.Port() != from.Port() {
					t.Errorf("datagram %d from %v, want %v", i, d.from, from)
				}
				if wantTrunc := len(sent[i]) > size; d.trunc != wantTrunc {
					t.Errorf("datagram %d (%d bytes): truncated %v, want %v", i, len(sent[i]), d.trunc, wantTrunc)
				}
				if !d.trunc && string(d.b) != string(sent[i]) {
					t.Errorf("datagram %d: %q, want %q", i, d.b, sent[i])
				}
				if d.trunc && len(d.b) != size {
					t.Errorf("truncated datagram %d holds %d bytes, want the buffer's %d", i, len(d.b), size)
				}
			}
			pc.Close()
			if _, err := rd.read(); err == nil {
				t.Error("a read on a closed socket gave no error")
			}
		})
	}
}

// TestLongUDPAnswerAskedAgainOverTCP: an upstream that answers past the
// reader's 4,096 bytes over UDP (ignoring the size asked) is asked again
// over TCP, and the client gets the whole answer from there.
func TestLongUDPAnswerAskedAgainOverTCP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(pc.LocalAddr().String())
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	long := func(via string) dns.HandlerFunc {
		return func(w dns.ResponseWriter, req *dns.Msg) {
			r := new(dns.Msg)
			r.SetReply(req)
			for i := range 30 { // ~6 KB of TXT
				r.Answer = append(r.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
					Txt: []string{via, strings.Repeat(string(rune('a'+i%26)), 180)}})
			}
			_ = w.WriteMsg(r) // no truncation to the client's size: a server that ignores it
		}
	}
	udp := &dns.Server{PacketConn: pc, Handler: long("udp")}
	tcp := &dns.Server{Listener: ln, Handler: long("tcp")}
	for _, s := range []*dns.Server{udp, tcp} {
		go func() { _ = s.ActivateAndServe() }()
		defer func() { _ = s.Shutdown() }()
	}
	_, fwd := startForwarder(t, tableWith(nil, addr))
	c := &dns.Client{Net: "udp", UDPSize: 65000, Timeout: 5 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion("big.example.", dns.TypeTXT)
	m.SetEdns0(65000, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, _, err := c.ExchangeContext(ctx, m, fwd.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 30 || r.Truncated {
		t.Fatalf("%d answers, truncated %v: want the whole answer", len(r.Answer), r.Truncated)
	}
	if via := r.Answer[0].(*dns.TXT).Txt[0]; via != "tcp" {
		t.Fatalf("the answer came over %s: a UDP answer longer than the reader's buffer must be asked again over TCP", via)
	}
}
