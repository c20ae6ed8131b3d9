package clusterdns

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// fakeWriter is a dns.ResponseWriter that records the reply.
type fakeWriter struct {
	remote net.Addr
	out    *dns.Msg
}

func (w *fakeWriter) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(100, 100, 1, 1), Port: 53}
}
func (w *fakeWriter) RemoteAddr() net.Addr      { return w.remote }
func (w *fakeWriter) WriteMsg(m *dns.Msg) error { w.out = m; return nil }
func (w *fakeWriter) Write([]byte) (int, error) { panic("the handler must use WriteMsg") }
func (w *fakeWriter) Close() error              { return nil }
func (w *fakeWriter) TsigStatus() error         { return nil }
func (w *fakeWriter) TsigTimersOnly(bool)       {}
func (w *fakeWriter) Hijack()                   {}

// FuzzHandler feeds random packets to the handler the way the server does
// (miekg/dns unpacks, the handler answers) and checks the reply: it packs,
// carries the query's id, never claims recursion, fits the UDP size and
// answers only cluster names, only with the server address.
func FuzzHandler(f *testing.F) {
	for _, q := range []*dns.Msg{
		query("app.ky3.rjwrn.example.com.", dns.TypeA),
		query("ky3.rjwrn.example.com.", dns.TypeSOA),
		query("www.example.test.", dns.TypeA),
		query("k8s.ky3.rjwrn.example.com.", dns.TypeAAAA),
	} {
		b, _ := q.Pack()
		f.Add(b, false)
		q.SetEdns0(4096, true)
		b, _ = q.Pack()
		f.Add(b, true)
	}
	f.Add([]byte{0, 1, 2}, false)
	z, err := NewZone(srvAddr, domains)
	if err != nil {
		f.Fatal(err)
	}
	var h Handler
	h.SetZone(z)
	f.Fuzz(func(t *testing.T, packet []byte, tcp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(packet); err != nil {
			return // the server answers FORMERR or drops it before any handler runs
		}
		var remote net.Addr = &net.UDPAddr{IP: net.IPv4(100, 96, 0, 2), Port: 5353}
		if tcp {
			remote = &net.TCPAddr{IP: net.IPv4(100, 96, 0, 2), Port: 5353}
		}
		w := &fakeWriter{remote: remote}
		h.ServeDNS(w, req)
		if w.out == nil {
			t.Fatal("no reply")
		}
		out, err := w.out.Pack()
		if err != nil {
			t.Fatalf("reply does not pack: %v", err)
		}
		if w.out.Id != req.Id || !w.out.Response || w.out.RecursionAvailable {
			t.Fatalf("bad reply header: %v", w.out.MsgHdr)
		}
		if !tcp && len(out) > dns.DefaultMsgSize {
			t.Fatalf("UDP reply of %d bytes", len(out))
		}
		if len(w.out.Answer) > 0 {
			if len(req.Question) != 1 || z.match(req.Question[0].Name) == "" {
				t.Fatalf("answered a name outside the cluster: %v", req.Question)
			}
			for _, rr := range w.out.Answer {
				switch rr := rr.(type) {
				case *dns.A:
					if !rr.A.Equal(srvAddr.AsSlice()) {
						t.Fatalf("answer %v", rr)
					}
				case *dns.SOA:
				default:
					t.Fatalf("unexpected answer type %v", rr)
				}
			}
		}
	})
}
