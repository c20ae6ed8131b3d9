// Package kube is the lab's stand-in for the inside of a Kubernetes
// cluster: a kube-dns that answers Service names under cluster.local, and
// an API server with enough of the API for `kubectl version` and `kubectl
// get pods` (discovery and a pod list). It is for the lab only: nothing of
// RunOS runs it, and it knows no more than the records it is given.
package kube

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// Domain is the cluster domain the stand-ins answer, as kubeadm's default.
const Domain = "cluster.local"

// Service is a Kubernetes Service as the stand-ins know it.
type Service struct {
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	ClusterIP netip.Addr `json:"clusterIp"`
	Port      int        `json:"port"`
	// Pods are the addresses behind the Service; a headless Service (no
	// ClusterIP) resolves to them.
	Pods []netip.Addr `json:"pods,omitempty"`
}

// FQDN is the Service's name in the cluster: <name>.<ns>.svc.cluster.local.
func (s Service) FQDN() string { return s.Name + "." + s.Namespace + ".svc." + Domain + "." }

// Pod is a pod as `kubectl get pods` lists it.
type Pod struct {
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	Node      string     `json:"node"`
	IP        netip.Addr `json:"ip"`
}

// World is everything the stand-ins of one cluster know.
type World struct {
	Cluster  string    `json:"cluster"`
	Services []Service `json:"services"`
	Pods     []Pod     `json:"pods"`
}

// DNS answers A queries for the Services' names (a headless Service with
// its pods' addresses), NXDOMAIN for other names under cluster.local, and
// refuses everything else, as kube-dns does for a client outside the
// search path.
type DNS struct {
	records map[string][]netip.Addr
}

// NewDNS makes the kube-dns of w.
func NewDNS(w World) *DNS {
	d := &DNS{records: map[string][]netip.Addr{}}
	for _, s := range w.Services {
		if s.ClusterIP.IsValid() {
			d.records[s.FQDN()] = []netip.Addr{s.ClusterIP}
		} else {
			d.records[s.FQDN()] = append([]netip.Addr(nil), s.Pods...)
		}
	}
	return d
}

// Names are the names answered, sorted (for logs).
func (d *DNS) Names() []string {
	var out []string
	for n := range d.records {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ServeDNS answers one query.
func (d *DNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(dns.Fqdn(q.Name))
	if !dns.IsSubDomain(Domain+".", name) {
		resp.Rcode = dns.RcodeRefused
		_ = w.WriteMsg(resp)
		return
	}
	resp.Authoritative = true
	addrs, ok := d.records[name]
	switch {
	case !ok:
		resp.Rcode = dns.RcodeNameError
	case q.Qtype == dns.TypeA:
		for _, a := range addrs {
			resp.Answer = append(resp.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: a.AsSlice()})
		}
	}
	if err := w.WriteMsg(resp); err != nil {
		fmt.Println("kube-dns: write:", err)
	}
}
