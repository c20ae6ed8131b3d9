package dnsplit

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// checkingExchanger stands in for every upstream and fails the test if the
// forwarder ever sends one anything but a well-formed, single-question query.
type checkingExchanger struct{ t *testing.T }

// send answers at once, on the caller's goroutine: the forwarder must cope
// with done being called before send returns.
func (e checkingExchanger) send(b []byte, s netip.AddrPort, tcp bool, _ time.Duration, done func([]byte, error)) {
	done(e.exchange(b, tcp))
}

func (e checkingExchanger) exchange(b []byte, tcp bool) ([]byte, error) {
	var back dns.Msg
	if err := back.Unpack(b); err != nil {
		e.t.Fatalf("forwarded a malformed packet: %v", err)
	}
	if back.Response || back.Opcode != dns.OpcodeQuery || len(back.Question) != 1 || len(back.Answer)+len(back.Ns) != 0 {
		e.t.Fatalf("forwarded something that is not a plain query:\n%v", &back)
	}
	for _, rr := range back.Extra {
		if _, ok := rr.(*dns.OPT); !ok {
			e.t.Fatalf("forwarded an additional record that is not OPT: %v", rr)
		}
	}
	// Vary the upstream's behaviour by the question, so the fuzzer
	// reaches failover, truncation and errors.
	r := new(dns.Msg)
	r.SetReply(&back)
	switch len(back.Question[0].Name) % 5 {
	case 0:
		return nil, errors.New("unreachable")
	case 1:
		r.Rcode = dns.RcodeRefused
	case 2:
		if !tcp {
			r.Truncated = true
			break
		}
		fallthrough
	default:
		for i := range 30 {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: back.Question[0].Name, Rrtype: dns.TypeA,
				Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(10, 0, 0, byte(i)).To4()})
		}
	}
	return r.Pack()
}

// FuzzForwarderPacket feeds arbitrary bytes through exactly what the
// forwarder does with a packet from a client (handlePacket). It must never
// panic, never forward a malformed packet, never answer a response, and
// always answer with something that parses and fits the client's buffer.
func FuzzForwarderPacket(f *testing.F) {
	seed := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	q := new(dns.Msg)
	q.SetQuestion("app.ky3.rjwrn.example.com.", dns.TypeA)
	seed(q)
	q = new(dns.Msg)
	q.SetQuestion("www.example.test.", dns.TypeAAAA)
	q.SetEdns0(4096, true)
	seed(q)
	q = new(dns.Msg)
	q.SetUpdate("example.test.")
	seed(q)
	f.Add([]byte{0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f}, false)

	table := newForwardTable([]Route{{CID: "ky3", Server: netip.MustParseAddr("100.100.1.1"),
		Domains: []string{"ky3.rjwrn.example.com"}}},
		[]netip.AddrPort{netip.MustParseAddrPort("10.77.0.53:53"), netip.MustParseAddrPort("10.77.0.54:53")},
		time.Second, DefaultListenAddr)

	f.Fuzz(func(t *testing.T, data []byte, tcp bool) {
		fw := newForwarder(slog.New(slog.DiscardHandler), time.Now, checkingExchanger{t}, table)
		out := fw.handlePacket(data, tcp)
		if out == nil {
			return
		}
		if len(data) < 12 || data[2]&0x80 != 0 {
			t.Fatal("answered a response or a runt")
		}
		var resp dns.Msg
		if err := resp.Unpack(out); err != nil {
			t.Fatalf("answer does not parse: %v", err)
		}
		if resp.Id != binary.BigEndian.Uint16(data) || !resp.Response {
			t.Fatalf("answer has id %d response=%v for query id %d", resp.Id, resp.Response, binary.BigEndian.Uint16(data))
		}
		limit := dns.MinMsgSize
		var req dns.Msg
		if req.Unpack(data) == nil {
			if opt := req.IsEdns0(); opt != nil {
				limit = max(limit, int(opt.UDPSize()))
			}
		}
		if !tcp && len(out) > limit {
			t.Fatalf("UDP answer of %d bytes for a client that takes %d", len(out), limit)
		}
	})
}
