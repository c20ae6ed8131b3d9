// Package clusterdns is the cluster's DNS at the gateway: on the VPN
// server's address it answers every name under the cluster's domains (the
// apex included) with that address, and refuses everything else. It is
// authoritative only; it never recurses, so it cannot be used to resolve
// (or amplify) anything outside the cluster.
package clusterdns

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/runos/vpn/api"
)

// TTL of the answers. The address belongs to the service, not the node, so
// a move changes no answer; the TTL only bounds how long a removed service
// keeps resolving in caches.
const TTL = 60

// Zone is what the cluster DNS answers: every name under Domains resolves to
// Address. A Zone is immutable once made; the handler swaps whole zones.
type Zone struct {
	address netip.Addr
	domains []string // canonical: lowercase, fully qualified, longest first
	inside  *Inside  // names inside the cluster (inside.go); nil: none
}

// NewZone checks the domains and returns the zone. Domains are given without
// a trailing dot (ky3.rjwrn.example.com); case does not matter.
func NewZone(address netip.Addr, domains []string) (*Zone, error) {
	if !address.IsValid() {
		return nil, fmt.Errorf("cluster dns: no server address")
	}
	z := &Zone{address: address.Unmap()}
	seen := map[string]bool{}
	for _, d := range domains {
		c := dns.CanonicalName(strings.TrimSpace(d))
		if c == "." {
			return nil, fmt.Errorf("cluster dns: domain %q: the root is not a cluster domain", d)
		}
		if !isHostname(c) {
			return nil, fmt.Errorf("cluster dns: domain %q is not a valid DNS name (letters, digits and hyphens, dot-separated)", d)
		}
		if !seen[c] {
			seen[c] = true
			z.domains = append(z.domains, c)
		}
	}
	// Longest first, so the most specific domain owns the SOA of its names.
	for i := 1; i < len(z.domains); i++ {
		for j := i; j > 0 && dns.CountLabel(z.domains[j]) > dns.CountLabel(z.domains[j-1]); j-- {
			z.domains[j], z.domains[j-1] = z.domains[j-1], z.domains[j]
		}
	}
	return z, nil
}

// Address is the address the zone answers with.
func (z *Zone) Address() netip.Addr { return z.address }

// Domains are the zone's domains, canonical (lowercase, trailing dot).
func (z *Zone) Domains() []string { return append([]string(nil), z.domains...) }

// match returns the zone's domain that name is in (the apex included), or "".
func (z *Zone) match(name string) string {
	name = dns.CanonicalName(name)
	for _, d := range z.domains {
		if dns.IsSubDomain(d, name) {
			return d
		}
	}
	return ""
}

// Answer builds the reply to req. It never fails: what it cannot answer is
// FORMERR, NOTIMP or REFUSED. A nil zone refuses everything. Names inside
// the cluster are refused here (SERVFAIL): AnswerWith asks kube-dns.
func (z *Zone) Answer(req *dns.Msg) *dns.Msg { return z.AnswerWith(req, nil) }

// AnswerWith is Answer that asks kube-dns with exchange for the names
// inside the cluster (nil: they fail with SERVFAIL).
func (z *Zone) AnswerWith(req *dns.Msg, exchange Exchanger) *dns.Msg {
	resp := new(dns.Msg)
	resp.SetReply(req) // echoes the id, opcode, RD, CD and the first question
	resp.RecursionAvailable = false
	if opt := req.IsEdns0(); opt != nil {
		if opt.Version() != 0 {
			resp.Rcode = dns.RcodeBadVers
			resp.SetEdns0(dns.DefaultMsgSize, false)
			return resp
		}
		resp.SetEdns0(dns.DefaultMsgSize, false)
	}
	switch {
	case req.Response:
		resp.Rcode = dns.RcodeFormatError
		return resp
	case req.Opcode != dns.OpcodeQuery:
		resp.Rcode = dns.RcodeNotImplemented
		return resp
	case len(req.Question) != 1:
		resp.Question = nil
		resp.Rcode = dns.RcodeFormatError
		return resp
	}
	q := req.Question[0]
	if ask, mappedOnly := z.insideName(q.Name); ask != "" && (q.Qclass == dns.ClassINET || q.Qclass == dns.ClassANY) {
		if exchange == nil {
			resp.Rcode = dns.RcodeServerFailure
			return resp
		}
		return z.answerInside(req, resp, ask, mappedOnly, exchange)
	}
	domain := ""
	if z != nil {
		domain = z.match(q.Name)
	}
	if domain == "" || (q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY) {
		resp.Rcode = dns.RcodeRefused
		return resp
	}
	resp.Authoritative = true
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: TTL}
	switch {
	case q.Qtype == dns.TypeA && z.address.Is4(), q.Qtype == dns.TypeANY && z.address.Is4():
		hdr.Rrtype = dns.TypeA
		resp.Answer = []dns.RR{&dns.A{Hdr: hdr, A: z.address.AsSlice()}}
	case q.Qtype == dns.TypeAAAA && z.isAPIName(q.Name):
		hdr.Rrtype = dns.TypeAAAA
		resp.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: api.MappedAddr(z.inside.Mapped, z.inside.VIP).AsSlice()}}
	case q.Qtype == dns.TypeAAAA && z.address.Is6(), q.Qtype == dns.TypeANY && z.address.Is6():
		hdr.Rrtype = dns.TypeAAAA
		resp.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: z.address.AsSlice()}}
	case q.Qtype == dns.TypeSOA && dns.CanonicalName(q.Name) == domain:
		resp.Answer = []dns.RR{soa(domain)}
	default:
		// The name exists, the type does not: NODATA, with the SOA so
		// resolvers may cache the absence (RFC 2308).
		resp.Ns = []dns.RR{soa(domain)}
	}
	return resp
}

func soa(domain string) dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns:      "ns." + domain,
		Mbox:    "hostmaster." + domain,
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  TTL,
	}
}

// isHostname reports whether the canonical name c is made of hostname labels
// (letters, digits, hyphens; underscores for service labels), each 1 to 63
// bytes, at most 253 bytes in all. dns.IsDomainName accepts any byte, which
// is right for queries but too loose for the names control hands us.
func isHostname(c string) bool {
	c = strings.TrimSuffix(c, ".")
	if c == "" || len(c) > 253 {
		return false
	}
	for _, l := range strings.Split(c, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			b := l[i]
			if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
				return false
			}
		}
	}
	return true
}
