package clusterdns

import (
	"net"
	"sync/atomic"

	"github.com/miekg/dns"
)

// Handler is the dns.Handler of the cluster DNS. Its zone is swapped whole
// (SetZone) when the map changes, so queries never see half a change and
// the listeners never restart for a new set of domains.
type Handler struct {
	zone atomic.Pointer[Zone]
	// Exchange asks kube-dns for names inside the cluster; nil: over UDP
	// (TCP when truncated) with a 2 s timeout.
	Exchange Exchanger
}

// SetZone replaces the zone answered from now on; nil refuses everything.
func (h *Handler) SetZone(z *Zone) { h.zone.Store(z) }

// Zone returns the zone in effect (nil when none).
func (h *Handler) Zone() *Zone { return h.zone.Load() }

// ServeDNS answers one query.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	ex := h.Exchange
	if ex == nil {
		ex = defaultExchange
	}
	resp := h.zone.Load().AnswerWith(req, ex)
	resp.Compress = true
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil && int(opt.UDPSize()) > size {
			size = int(min(opt.UDPSize(), dns.DefaultMsgSize))
		}
		resp.Truncate(size)
	}
	_ = w.WriteMsg(resp)
}
