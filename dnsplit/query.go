package dnsplit

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// start is everything the forwarder does with one packet from a client;
// reply is called exactly once, with the answer, or nil to send nothing (a
// response, or too short to answer: replying would let anyone bounce
// traffic off us). Only a query it packed itself from the parsed, checked
// one ever leaves for an upstream.
func (f *forwarder) start(raw []byte, tcp bool, reply func([]byte)) {
	if len(raw) < 12 || raw[2]&0x80 != 0 {
		reply(nil)
		return
	}
	req := new(dns.Msg)
	if err := req.Unpack(raw); err != nil {
		// The header is readable (12 bytes): say FORMERR under its ID.
		r := &dns.Msg{MsgHdr: dns.MsgHdr{Id: binary.BigEndian.Uint16(raw), Response: true,
			Opcode: int(raw[2]>>3) & 0xF, Rcode: dns.RcodeFormatError}}
		out, _ := r.Pack()
		reply(out)
		return
	}
	if req.Opcode != dns.OpcodeQuery {
		reply(packReply(req, dns.RcodeNotImplemented))
		return
	}
	if len(req.Question) != 1 || len(req.Answer) > 0 || len(req.Ns) > 0 {
		reply(packReply(req, dns.RcodeFormatError))
		return
	}
	q := req.Question[0]
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		if opt.Version() != 0 {
			// RFC 6891 6.1.3: unknown EDNS version.
			r := reply0(req, dns.RcodeBadVers)
			r.SetEdns0(dns.DefaultMsgSize, false)
			out, _ := r.Pack()
			reply(out)
			return
		}
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	if tcp {
		size = dns.MaxMsgSize
	}

	t := f.table.Load()
	targets := t.upstreams
	if z, cluster := t.route(strings.ToLower(q.Name)); cluster {
		// A cluster's names never leak to the public resolvers: if its
		// server is down they fail, they do not resolve elsewhere.
		targets = []netip.AddrPort{z.server}
	} else if t.refuseOthers {
		reply(packReply(req, dns.RcodeRefused))
		return
	} else {
		targets = f.byHealth(targets)
	}
	out := &dns.Msg{MsgHdr: req.MsgHdr, Question: []dns.Question{q}, Extra: onlyOPT(req.Extra)}
	out.Zero = false
	pkt, err := out.Pack()
	if err != nil {
		reply(packReply(req, dns.RcodeFormatError))
		return
	}
	p := &pending{f: f, req: req, pkt: pkt, qlen: questionLen(pkt), size: size, tcp: tcp, targets: targets,
		timeout: t.timeout, deadline: time.Now().Add(queryBudget), reply: reply}
	if f.counts != nil {
		f.counts.forwarded.Add(1)
	}
	p.next()
}

// pending is one client query on its way. Its attempts are made one after
// the other and each ends in exactly one call of result, so nothing in it
// is ever touched by two goroutines at once.
type pending struct {
	f        *forwarder
	req      *dns.Msg
	pkt      []byte // the query as sent upstream
	qlen     int
	size     int  // the client's buffer
	tcp      bool // the client came over TCP
	targets  []netip.AddrPort
	i        int  // the target being asked
	viaTCP   bool // asking targets[i] again over TCP after a truncated answer
	timeout  time.Duration
	deadline time.Time
	last     []byte // the last answer that came back, if only a refusal
	reply    func([]byte)
}

func (p *pending) next() {
	if p.i < len(p.targets) {
		if left := time.Until(p.deadline); left > 0 {
			p.f.ex.send(p.pkt, p.targets[p.i], p.tcp || p.viaTCP, min(p.timeout, left), p.result)
			return
		}
	}
	p.finish()
}

func (p *pending) result(r []byte, err error) {
	s := p.targets[p.i]
	if err == nil && !p.tcp && !p.viaTCP && len(r) >= 12 && r[2]&0x02 != 0 {
		p.viaTCP = true // truncated: the same server again, over TCP
		p.next()
		return
	}
	p.viaTCP = false
	p.i++
	switch {
	case err != nil:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			p.f.markFailed(s)
		}
		p.f.log.Debug("dns: upstream failed", "server", s, "name", p.req.Question[0].Name, "err", err)
	case !answers(r, p.pkt, p.qlen):
		p.f.log.Debug("dns: answer does not match the question", "server", s, "name", p.req.Question[0].Name)
	default:
		p.last = r
		if rc := r[3] & 0xF; rc != dns.RcodeServerFailure && rc != dns.RcodeRefused {
			p.finish()
			return
		}
		// SERVFAIL or REFUSED: as glibc does, the next server may know better.
	}
	p.next()
}

// finish answers the client: the last answer with the client's spelling of
// the question put back (same length: answers checked it matches ignoring
// case), fitted to its buffer; SERVFAIL if no server answered.
func (p *pending) finish() {
	if p.last == nil {
		p.reply(packReply(p.req, dns.RcodeServerFailure))
		return
	}
	copy(p.last[12:12+p.qlen], p.pkt[12:12+p.qlen])
	if len(p.last) > p.size {
		p.reply(truncate(p.last, p.size))
		return
	}
	p.reply(p.last)
}

// byHealth keeps the order of the servers but moves the ones that timed out
// recently to the end, so one dead nameserver does not cost every query a
// timeout.
func (f *forwarder) byHealth(ss []netip.AddrPort) []netip.AddrPort {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.failed) == 0 {
		return ss
	}
	now := f.now()
	var good, bad []netip.AddrPort
	for _, s := range ss {
		if at, ok := f.failed[s]; ok && now.Sub(at) < failMemory {
			bad = append(bad, s)
		} else {
			delete(f.failed, s)
			good = append(good, s)
		}
	}
	return append(good, bad...)
}

func (f *forwarder) markFailed(s netip.AddrPort) {
	f.mu.Lock()
	f.failed[s] = f.now()
	f.mu.Unlock()
}
