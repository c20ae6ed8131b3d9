package dnsplit

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// answers says whether r is a response to query: same ID, QR set, opcode
// QUERY, one question, the same question (names compared ignoring case).
func answers(r, query []byte, qlen int) bool {
	if len(r) < 12+qlen || r[0] != query[0] || r[1] != query[1] || r[2]&0x80 == 0 || r[2]&0x78 != 0 ||
		r[4] != 0 || r[5] != 1 {
		return false
	}
	for i := 12; i < 12+qlen; i++ {
		a, b := r[i], query[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// questionLen is the length of the question section of a query we packed
// (one uncompressed name, type, class).
func questionLen(query []byte) int {
	i := 12
	for i < len(query) && query[i] != 0 {
		i += int(query[i]) + 1
	}
	return i + 1 + 4 - 12
}

// truncate fits an answer into a client's UDP buffer the way a server
// would: as many whole records as fit, TC set if any were left out. One
// that does not parse is not sent at all: SERVFAIL instead.
func truncate(raw []byte, size int) []byte {
	m := new(dns.Msg)
	if err := m.Unpack(raw); err != nil {
		r := &dns.Msg{MsgHdr: dns.MsgHdr{Id: binary.BigEndian.Uint16(raw), Response: true, Rcode: dns.RcodeServerFailure}}
		out, _ := r.Pack()
		return out
	}
	m.Truncate(size)
	out, err := m.Pack()
	if err != nil {
		return nil
	}
	return out
}

// reply0 is an empty answer to req with rcode.
func reply0(req *dns.Msg, rcode int) *dns.Msg {
	r := new(dns.Msg)
	r.SetRcode(req, rcode)
	r.RecursionAvailable = true
	return r
}

func packReply(req *dns.Msg, rcode int) []byte {
	out, err := reply0(req, rcode).Pack()
	if err != nil {
		return nil
	}
	return out
}

// onlyOPT keeps the client's EDNS record (its buffer size, DO bit, cookie)
// and drops anything else from the additional section, such as a TSIG
// meant for us, which an upstream would reject.
func onlyOPT(extra []dns.RR) []dns.RR {
	for _, rr := range extra {
		if opt, ok := rr.(*dns.OPT); ok {
			return []dns.RR{opt}
		}
	}
	return nil
}
