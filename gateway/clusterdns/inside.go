package clusterdns

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/runos/vpn/api"
)

// Names inside the cluster (issue 21), answered from the cluster's own DNS
// (kube-dns), never from a list kept by hand:
//
//   - <service>.<namespace>.svc.<cid>.<aid>.<root>: kube-dns' answer for
//     <service>.<namespace>.svc.cluster.local, each address rewritten into
//     the cluster's mapped range (AAAA; A has no data): the laptop routes
//     that range to this cluster alone, whatever other clusters use.
//     A headless Service gives its pods' addresses, mapped.
//   - k8s.<cid>.<aid>.<root>: AAAA the mapped control-plane VIP, where the
//     Kubernetes API listens (A stays the VPN server's address).
//   - *.svc.cluster.local (routed here by the default cluster only): A as
//     kube-dns answers (the default cluster's raw ranges are routed), AAAA
//     the same mapped.
//
// Everything else under the cluster's domains answers as before.

// ServiceDomain is the in-cluster domain answered through kube-dns.
const ServiceDomain = "svc.cluster.local."

// Inside is what the zone needs to answer names inside the cluster.
type Inside struct {
	Domain  string         // the cluster's built-in domain, <cid>.<aid>.<root>
	KubeDNS netip.AddrPort // the cluster's DNS (kube-dns), port 53
	Mapped  netip.Prefix   // the cluster's mapped /96
	VIP     netip.Addr     // the control-plane VIP (invalid: none)
}

// WithInside returns a copy of z that also answers the names inside the
// cluster.
func (z *Zone) WithInside(in Inside) (*Zone, error) {
	if !in.KubeDNS.IsValid() || in.Mapped.Bits() != 96 {
		return nil, fmt.Errorf("cluster dns: inside needs kube-dns' address and a mapped /96")
	}
	c := *z
	in.Domain = dns.CanonicalName(in.Domain)
	c.inside = &in
	return &c, nil
}

// InsideTTL caps the TTL of rewritten answers: kube-dns' own are short.
const InsideTTL = 30

// insideName classifies a query name: the in-cluster name to ask kube-dns
// for ("" when it is not one), and whether the answer is rewritten into
// the mapped range only (a per-cluster name) or given raw too.
func (z *Zone) insideName(name string) (ask string, mappedOnly bool) {
	if z == nil || z.inside == nil {
		return "", false
	}
	name = dns.CanonicalName(name)
	if dns.IsSubDomain(ServiceDomain, name) {
		return name, false
	}
	suffix := ".svc." + z.inside.Domain
	if strings.HasSuffix(name, suffix) {
		labels := dns.SplitDomainName(strings.TrimSuffix(name, suffix))
		if len(labels) >= 2 {
			return strings.Join(labels, ".") + "." + ServiceDomain, true
		}
	}
	return "", false
}

// isAPIName reports whether name is k8s.<domain> and the VIP is known.
func (z *Zone) isAPIName(name string) bool {
	return z != nil && z.inside != nil && z.inside.VIP.IsValid() && dns.CanonicalName(name) == "k8s."+z.inside.Domain
}

// Rewrite turns kube-dns' answer for ask into the answer to q: A records
// kept (unless mappedOnly) or rewritten to AAAA in the mapped range, every
// other record dropped, names set to q's, TTLs capped.
func Rewrite(q dns.Question, kube *dns.Msg, mapped netip.Prefix, mappedOnly bool) []dns.RR {
	var out []dns.RR
	for _, rr := range kube.Answer {
		a, ok := rr.(*dns.A)
		if !ok {
			continue
		}
		v4, ok := netip.AddrFromSlice(a.A.To4())
		if !ok {
			continue
		}
		ttl := min(a.Hdr.Ttl, InsideTTL)
		switch {
		case (q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY) && !mappedOnly:
			out = append(out, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: v4.AsSlice()})
		}
		if q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY {
			m := api.MappedAddr(mapped, v4)
			out = append(out, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: m.AsSlice()})
		}
	}
	return out
}

// Exchanger asks a DNS server (kube-dns).
type Exchanger func(m *dns.Msg, server string) (*dns.Msg, error)

// defaultExchange asks over UDP, and again over TCP when truncated.
func defaultExchange(m *dns.Msg, server string) (*dns.Msg, error) {
	c := &dns.Client{Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.Exchange(m, server)
	}
	return r, err
}

// answerInside answers a name inside the cluster by asking kube-dns.
func (z *Zone) answerInside(req, resp *dns.Msg, ask string, mappedOnly bool, exchange Exchanger) *dns.Msg {
	q := req.Question[0]
	m := new(dns.Msg)
	m.SetQuestion(ask, dns.TypeA)
	r, err := exchange(m, z.inside.KubeDNS.String())
	if err != nil || r == nil {
		resp.Rcode = dns.RcodeServerFailure
		return resp
	}
	if r.Rcode != dns.RcodeSuccess {
		resp.Rcode = r.Rcode
		return resp
	}
	resp.Authoritative = true
	resp.Answer = Rewrite(q, r, z.inside.Mapped, mappedOnly)
	if len(resp.Answer) == 0 {
		resp.Ns = []dns.RR{soa(z.insideSOA(q.Name))}
	}
	return resp
}

func (z *Zone) insideSOA(name string) string {
	if dns.IsSubDomain(ServiceDomain, dns.CanonicalName(name)) {
		return ServiceDomain
	}
	return z.inside.Domain
}
