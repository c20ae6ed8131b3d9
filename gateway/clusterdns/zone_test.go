package clusterdns

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

var (
	srvAddr = netip.MustParseAddr("100.100.1.1")
	domains = []string{"ky3.rjwrn.example.com", "apps.customer.test"}
)

func mustZone(t testing.TB) *Zone {
	t.Helper()
	z, err := NewZone(srvAddr, domains)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

func TestAnswers(t *testing.T) {
	z := mustZone(t)
	for _, tc := range []struct {
		name   string
		qtype  uint16
		rcode  int
		answer bool // an A record of the server address
		soaNs  bool // an SOA in the authority section
	}{
		{"ky3.rjwrn.example.com.", dns.TypeA, dns.RcodeSuccess, true, false},
		{"app.ky3.rjwrn.example.com.", dns.TypeA, dns.RcodeSuccess, true, false},
		{"k8s.ky3.rjwrn.example.com.", dns.TypeA, dns.RcodeSuccess, true, false},
		{"a.b.c.ky3.rjwrn.example.com.", dns.TypeA, dns.RcodeSuccess, true, false},
		{"APP.Ky3.RJWRN.Example.COM.", dns.TypeA, dns.RcodeSuccess, true, false},
		{"x.apps.customer.test.", dns.TypeA, dns.RcodeSuccess, true, false},
		{"app.ky3.rjwrn.example.com.", dns.TypeANY, dns.RcodeSuccess, true, false},
		{"app.ky3.rjwrn.example.com.", dns.TypeAAAA, dns.RcodeSuccess, false, true},
		{"app.ky3.rjwrn.example.com.", dns.TypeMX, dns.RcodeSuccess, false, true},
		{"app.ky3.rjwrn.example.com.", dns.TypeTXT, dns.RcodeSuccess, false, true},
		{"www.example.test.", dns.TypeA, dns.RcodeRefused, false, false},
		{"example.com.", dns.TypeA, dns.RcodeRefused, false, false},
		{"rjwrn.example.com.", dns.TypeA, dns.RcodeRefused, false, false},
		{"xky3.rjwrn.example.com.", dns.TypeA, dns.RcodeRefused, false, false},
		{"ky3.rjwrn.example.com.evil.test.", dns.TypeA, dns.RcodeRefused, false, false},
		{".", dns.TypeNS, dns.RcodeRefused, false, false},
	} {
		resp := z.Answer(query(tc.name, tc.qtype))
		if resp.Rcode != tc.rcode {
			t.Errorf("%s %s: rcode %s, want %s", tc.name, dns.TypeToString[tc.qtype], dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.rcode])
			continue
		}
		if resp.RecursionAvailable {
			t.Errorf("%s: RA set; the cluster DNS never recurses", tc.name)
		}
		if tc.answer {
			if len(resp.Answer) != 1 {
				t.Errorf("%s: %d answers, want 1", tc.name, len(resp.Answer))
				continue
			}
			a, ok := resp.Answer[0].(*dns.A)
			if !ok || !a.A.Equal(srvAddr.AsSlice()) || a.Hdr.Name != tc.name || !resp.Authoritative {
				t.Errorf("%s: answer %v (aa=%v)", tc.name, resp.Answer[0], resp.Authoritative)
			}
		} else if len(resp.Answer) != 0 {
			t.Errorf("%s %s: unexpected answers %v", tc.name, dns.TypeToString[tc.qtype], resp.Answer)
		}
		if got := len(resp.Ns) == 1 && resp.Ns[0].Header().Rrtype == dns.TypeSOA; got != tc.soaNs {
			t.Errorf("%s %s: SOA in authority = %v, want %v (%v)", tc.name, dns.TypeToString[tc.qtype], got, tc.soaNs, resp.Ns)
		}
		if tc.rcode == dns.RcodeRefused && (len(resp.Ns) != 0 || resp.Authoritative) {
			t.Errorf("%s: a refusal must carry nothing", tc.name)
		}
	}
}

func TestSOAAtApexAndLongestDomain(t *testing.T) {
	z, err := NewZone(srvAddr, []string{"ky3.rjwrn.example.com", "k8s.ky3.rjwrn.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	resp := z.Answer(query("ky3.rjwrn.example.com.", dns.TypeSOA))
	if len(resp.Answer) != 1 || resp.Answer[0].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("SOA at apex: %v", resp)
	}
	resp = z.Answer(query("x.k8s.ky3.rjwrn.example.com.", dns.TypeAAAA))
	if len(resp.Ns) != 1 || resp.Ns[0].Header().Name != "k8s.ky3.rjwrn.example.com." {
		t.Fatalf("NODATA SOA should come from the most specific domain: %v", resp.Ns)
	}
}

func TestIPv6ServerAddress(t *testing.T) {
	z, err := NewZone(netip.MustParseAddr("fd00::1"), domains)
	if err != nil {
		t.Fatal(err)
	}
	if r := z.Answer(query("app.ky3.rjwrn.example.com.", dns.TypeAAAA)); len(r.Answer) != 1 {
		t.Fatalf("AAAA for a v6 server: %v", r)
	}
	if r := z.Answer(query("app.ky3.rjwrn.example.com.", dns.TypeA)); len(r.Answer) != 0 || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("A for a v6 server: %v", r)
	}
}

func TestRefusesOddRequests(t *testing.T) {
	z := mustZone(t)
	q := query("app.ky3.rjwrn.example.com.", dns.TypeA)
	q.Question[0].Qclass = dns.ClassCHAOS
	if r := z.Answer(q); r.Rcode != dns.RcodeRefused {
		t.Errorf("CHAOS class: %s", dns.RcodeToString[r.Rcode])
	}
	q = query("app.ky3.rjwrn.example.com.", dns.TypeA)
	q.Opcode = dns.OpcodeUpdate
	if r := z.Answer(q); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("UPDATE: %s", dns.RcodeToString[r.Rcode])
	}
	q = query("app.ky3.rjwrn.example.com.", dns.TypeA)
	q.Question = append(q.Question, q.Question[0])
	if r := z.Answer(q); r.Rcode != dns.RcodeFormatError || len(r.Question) != 0 {
		t.Errorf("two questions: %s", dns.RcodeToString[r.Rcode])
	}
	q = query("app.ky3.rjwrn.example.com.", dns.TypeA)
	q.Question = nil
	if r := z.Answer(q); r.Rcode != dns.RcodeFormatError {
		t.Errorf("no question: %s", dns.RcodeToString[r.Rcode])
	}
	var nilZone *Zone
	if r := nilZone.Answer(query("app.ky3.rjwrn.example.com.", dns.TypeA)); r.Rcode != dns.RcodeRefused {
		t.Errorf("no zone: %s", dns.RcodeToString[r.Rcode])
	}
	q = query("app.ky3.rjwrn.example.com.", dns.TypeA)
	q.SetEdns0(1232, false)
	q.IsEdns0().SetVersion(1)
	if r := z.Answer(q); r.Rcode != dns.RcodeBadVers {
		t.Errorf("EDNS version 1: %s", dns.RcodeToString[r.Rcode])
	}
}

func TestNewZoneRejectsBadDomains(t *testing.T) {
	for _, d := range []string{"", ".", "a..b", "bad name.example", "nul\x00.example", "-a.example", strings.Repeat("a", 64) + ".example"} {
		if _, err := NewZone(srvAddr, []string{d}); err == nil {
			t.Errorf("domain %q accepted", d)
		}
	}
	if _, err := NewZone(netip.Addr{}, domains); err == nil {
		t.Error("zone without address accepted")
	}
	z, err := NewZone(srvAddr, []string{"KY3.rjwrn.example.com.", "ky3.rjwrn.example.com"})
	if err != nil || len(z.Domains()) != 1 || z.Domains()[0] != "ky3.rjwrn.example.com." {
		t.Fatalf("canonical domains: %v %v", z.Domains(), err)
	}
}
