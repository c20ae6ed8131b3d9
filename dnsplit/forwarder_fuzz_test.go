package dnsplit

import (
	"context"
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

func (e checkingExchanger) exchange(_ context.Context, m *dns.Msg, s netip.AddrPort, tcp bool) (*dns.Msg, error) {
	b, err := m.Pack()
	if err != nil {
		e.t.Fatalf("forwarder built a query it cannot pack: %v\n%v", err, m)
	}
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
	return r, nil
}

// FuzzForwarderPacket feeds arbitrary bytes through exactly what the
// forwarder does with a packet: miekg/dns's unpacking, then answer. It must
// never panic, never forward a malformed packet, and always answer with
// something that packs and fits the client's buffer.
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
		req := new(dns.Msg)
		if err := req.Unpack(data); err != nil {
			return // miekg/dns answers FORMERR itself and never calls the handler
		}
		resp := fw.answer(req, tcp)
		if resp == nil {
			if !req.Response {
				t.Fatal("a query went unanswered")
			}
			return
		}
		if resp.Id != req.Id || !resp.Response {
			t.Fatalf("answer has id %d response=%v for query id %d", resp.Id, resp.Response, req.Id)
		}
		b, err := resp.Pack()
		if err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, resp)
		}
		limit := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			limit = max(limit, int(opt.UDPSize()))
		}
		if !tcp && len(b) > limit {
			t.Fatalf("UDP answer of %d bytes for a client that takes %d", len(b), limit)
		}
	})
}
