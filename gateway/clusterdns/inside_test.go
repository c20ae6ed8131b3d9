package clusterdns

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/runos/vpn/api"
)

var insideMapped = netip.MustParsePrefix("fd52:4f53:5600:2::/96")

// kubeDNS is a fake kube-dns: web.default → 10.96.0.20, db.data (headless)
// → two pods, anything else NXDOMAIN.
func kubeDNS(asked *[]string) Exchanger {
	return func(m *dns.Msg, server string) (*dns.Msg, error) {
		*asked = append(*asked, m.Question[0].Name+"@"+server)
		r := new(dns.Msg)
		r.SetReply(m)
		a := func(ip string) dns.RR {
			return &dns.A{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP(ip)}
		}
		switch m.Question[0].Name {
		case "web.default.svc.cluster.local.":
			r.Answer = []dns.RR{a("10.96.0.20")}
		case "db.data.svc.cluster.local.":
			r.Answer = []dns.RR{a("10.244.2.11"), a("10.244.2.12"), &dns.CNAME{Hdr: dns.RR_Header{Name: "x.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET}, Target: "y."}}
		case "down.default.svc.cluster.local.":
			return nil, errors.New("timeout")
		default:
			r.Rcode = dns.RcodeNameError
		}
		return r, nil
	}
}

func insideZone(t *testing.T) *Zone {
	t.Helper()
	z, err := NewZone(netip.MustParseAddr("100.100.1.1"), []string{"ky3.rjwrn.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	z, err = z.WithInside(Inside{Domain: "ky3.rjwrn.example.com", KubeDNS: netip.MustParseAddrPort("10.96.0.10:53"),
		Mapped: insideMapped, VIP: netip.MustParseAddr("10.10.0.100")})
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func answers(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		switch x := rr.(type) {
		case *dns.A:
			out = append(out, x.A.String())
		case *dns.AAAA:
			out = append(out, x.AAAA.String())
		}
	}
	return out
}

func TestInsideNames(t *testing.T) {
	z := insideZone(t)
	var asked []string
	ex := kubeDNS(&asked)
	for _, c := range []struct {
		name  string
		qtype uint16
		rcode int
		want  string
	}{
		{"web.default.svc.ky3.rjwrn.example.com.", dns.TypeAAAA, dns.RcodeSuccess, "[fd52:4f53:5600:2::a60:14]"},
		{"WEB.default.svc.ky3.rjwrn.example.com.", dns.TypeA, dns.RcodeSuccess, "[]"}, // mapped only: NODATA
		{"db.data.svc.ky3.rjwrn.example.com.", dns.TypeAAAA, dns.RcodeSuccess, "[fd52:4f53:5600:2::af4:20b fd52:4f53:5600:2::af4:20c]"},
		{"nope.default.svc.ky3.rjwrn.example.com.", dns.TypeAAAA, dns.RcodeNameError, "[]"},
		{"down.default.svc.ky3.rjwrn.example.com.", dns.TypeAAAA, dns.RcodeServerFailure, "[]"},
		{"web.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "[10.96.0.20]"},
		{"web.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, "[fd52:4f53:5600:2::a60:14]"},
		{"k8s.ky3.rjwrn.example.com.", dns.TypeAAAA, dns.RcodeSuccess, "[fd52:4f53:5600:2::a0a:64]"},
		{"k8s.ky3.rjwrn.example.com.", dns.TypeA, dns.RcodeSuccess, "[100.100.1.1]"},
		{"app.ky3.rjwrn.example.com.", dns.TypeA, dns.RcodeSuccess, "[100.100.1.1]"},
		{"svc.ky3.rjwrn.example.com.", dns.TypeA, dns.RcodeSuccess, "[100.100.1.1]"},
		{"example.org.", dns.TypeA, dns.RcodeRefused, "[]"},
	} {
		r := z.AnswerWith(query(c.name, c.qtype), ex)
		if r.Rcode != c.rcode || fmtList(answers(r)) != c.want {
			t.Errorf("%s %s: rcode %s answers %v; want %s %s", c.name, dns.TypeToString[c.qtype], dns.RcodeToString[r.Rcode], answers(r), dns.RcodeToString[c.rcode], c.want)
		}
		for _, rr := range r.Answer {
			if rr.Header().Name != c.name || rr.Header().Ttl > InsideTTL && c.name != "app.ky3.rjwrn.example.com." && c.name != "k8s.ky3.rjwrn.example.com." && c.name != "svc.ky3.rjwrn.example.com." {
				t.Errorf("%s: record %v", c.name, rr)
			}
		}
	}
	if len(asked) == 0 || asked[0] != "web.default.svc.cluster.local.@10.96.0.10:53" {
		t.Errorf("asked kube-dns %v", asked)
	}
	// Without an exchanger (Answer), inside names fail rather than lie.
	if r := z.Answer(query("web.default.svc.ky3.rjwrn.example.com.", dns.TypeAAAA)); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("no exchanger: %s", dns.RcodeToString[r.Rcode])
	}
	// A zone without inside answers every name with the server, as before.
	plain, _ := NewZone(netip.MustParseAddr("100.100.1.1"), []string{"ky3.rjwrn.example.com"})
	if r := plain.AnswerWith(query("web.default.svc.ky3.rjwrn.example.com.", dns.TypeA), ex); fmtList(answers(r)) != "[100.100.1.1]" {
		t.Errorf("plain zone: %v", answers(r))
	}
	if r := plain.AnswerWith(query("web.default.svc.cluster.local.", dns.TypeA), ex); r.Rcode != dns.RcodeRefused {
		t.Errorf("plain zone, cluster.local: %s", dns.RcodeToString[r.Rcode])
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}

// FuzzRewrite: whatever kube-dns answers, the rewrite keeps only address
// records named as asked, every AAAA inside the mapped range and unmapping
// to an A kube-dns gave, TTLs capped.
func FuzzRewrite(f *testing.F) {
	f.Add([]byte{10, 96, 0, 20, 10, 244, 2, 11}, uint32(300), uint16(dns.TypeAAAA), false)
	f.Add([]byte{1, 2, 3}, uint32(5), uint16(dns.TypeA), true)
	f.Fuzz(func(t *testing.T, ips []byte, ttl uint32, qtype uint16, mappedOnly bool) {
		kube := new(dns.Msg)
		given := map[netip.Addr]bool{}
		for i := 0; i+4 <= len(ips) && i < 64; i += 4 {
			a := netip.AddrFrom4([4]byte(ips[i : i+4]))
			given[a] = true
			kube.Answer = append(kube.Answer, &dns.A{Hdr: dns.RR_Header{Name: "other.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: a.AsSlice()})
			kube.Answer = append(kube.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: "t.", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"x"}})
		}
		q := dns.Question{Name: "web.default.svc.ky3.rjwrn.example.com.", Qtype: qtype, Qclass: dns.ClassINET}
		for _, rr := range Rewrite(q, kube, insideMapped, mappedOnly) {
			h := rr.Header()
			if h.Name != q.Name || h.Ttl > InsideTTL {
				t.Fatalf("record %v", rr)
			}
			switch x := rr.(type) {
			case *dns.A:
				a, _ := netip.AddrFromSlice(x.A.To4())
				if mappedOnly || !given[a] || (qtype != dns.TypeA && qtype != dns.TypeANY) {
					t.Fatalf("A %s (mappedOnly %v, qtype %d)", a, mappedOnly, qtype)
				}
			case *dns.AAAA:
				a, _ := netip.AddrFromSlice(x.AAAA)
				v4, err := api.Unmapped(insideMapped, a)
				if err != nil || !given[v4] || (qtype != dns.TypeAAAA && qtype != dns.TypeANY) {
					t.Fatalf("AAAA %s: %v", a, err)
				}
			default:
				t.Fatalf("kept %v", rr)
			}
		}
	})
}
