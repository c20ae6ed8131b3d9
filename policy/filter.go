package policy

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
)

// Filter is one user's allow rules for one cluster, compiled into the
// tables a gateway checks every packet from that user's devices against:
// the address space cut into spans sorted by their first address, and in
// each span, per protocol, the allowed port ranges sorted by port, each
// with the line of the first rule allowing it. A check is two binary
// searches, whatever the number of rules; it answers as Decide would
// (TestFilterAgreesWithDecide).
//
// A Filter is immutable once compiled: a gateway swaps in a new one when
// the policy or the user's groups change.
type Filter struct {
	open   bool // the account has no policy: everything is allowed
	v4, v6 table
}

// The protocol classes a filter keeps ports for.
const (
	classTCP = iota
	classUDP
	classICMP
	classOther
	nClasses
)

type portRange struct {
	lo, hi uint16
	line   int32 // the rule that allows it
}

// span is the addresses from start up to the next span's start.
type span struct {
	start netip.Addr
	ports [nClasses][]portRange
	// near is the first rule whose destinations hold these addresses
	// (whatever their ports and protocols): the rule a refused packet to
	// them is counted against (Verdict); 0 for none.
	near int32
}

// table is one address family's spans; keys[i] is spans[i].start as a
// number, which compares faster than a netip.Addr.
type table struct {
	keys  []addrKey
	spans []span
	// whole are the ports of the rules for every address of the family
	// (*, 0.0.0.0/0, ::/0), kept apart: in the spans they would be
	// copied into every one of them.
	whole [nClasses][]portRange
	// wholeNear is the first of those rules (0: none), as span.near.
	wholeNear int32
}

type addrKey struct{ hi, lo uint64 }

func keyOf(a netip.Addr) addrKey {
	b := a.As16()
	return addrKey{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// after reports whether k is past a.
func (k addrKey) after(a addrKey) bool { return k.hi > a.hi || k.hi == a.hi && k.lo > a.lo }

// entry is one destination of one rule, for one address family.
type entry struct {
	pfx     netip.Prefix
	classes [nClasses]bool
	lo, hi  uint16
	line    int32
}

// Compile builds the filter of a subject's packets in a cluster.
func Compile(p *Policy, s Subject, cluster string) *Filter {
	if p == nil {
		return &Filter{open: true}
	}
	return p.compile(p.applicable(s, cluster))
}

// applicable are the indexes of the allow rules for the subject in the
// cluster: all a filter depends on.
func (p *Policy) applicable(s Subject, cluster string) []int {
	groups, user := p.groupsOf(s), strings.ToLower(s.User)
	var out []int
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Kind == Allow && r.forCluster(cluster) && r.forSubject(user, groups) {
			out = append(out, i)
		}
	}
	return out
}

func (p *Policy) compile(rules []int) *Filter {
	var v4, v6 []entry
	for _, i := range rules {
		r := &p.Rules[i]
		for _, d := range r.Dests {
			e := entry{lo: d.PortLo, hi: d.PortHi, line: int32(r.Line)}
			switch {
			case d.Proto == AnyProto && d.AllPorts():
				e.classes = [nClasses]bool{true, true, true, true}
			case d.Proto == AnyProto:
				e.classes[classTCP], e.classes[classUDP] = true, true
			case d.Proto == TCP:
				e.classes[classTCP] = true
			case d.Proto == UDP:
				e.classes[classUDP] = true
			case d.Proto == ICMP:
				e.classes[classICMP] = true
			}
			if !d.Prefix.IsValid() || d.Prefix.Addr().Is4() {
				e.pfx = d.Prefix
				if !d.Prefix.IsValid() {
					e.pfx = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
				}
				v4 = append(v4, e)
			}
			if !d.Prefix.IsValid() || d.Prefix.Addr().Is6() {
				e.pfx = d.Prefix
				if !d.Prefix.IsValid() {
					e.pfx = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
				}
				v6 = append(v6, e)
			}
		}
	}
	return &Filter{v4: build(v4, netip.IPv4Unspecified()), v6: build(v6, netip.IPv6Unspecified())}
}

// Check reports whether the packet is allowed and the line of the rule
// that allows it (0 when denied, or when the account has no policy).
func (f *Filter) Check(k Packet) (allow bool, line int) {
	if allow, line = f.Verdict(k); !allow {
		return false, 0
	}
	return true, line
}

// Verdict is Check naming a rule for a refused packet too, for the
// gateway's count of refusals per rule: the first rule whose destinations
// hold the packet's address (it was refused for its port or protocol), or
// 0 when no rule's destinations do (nothing allowed it: the default deny).
// The language has only allow rules, so no rule refuses a packet itself;
// this is the rule that came nearest, the one to widen if the refusal was
// wrong. It costs nothing more for an allowed packet.
func (f *Filter) Verdict(k Packet) (allow bool, line int) {
	if f.open {
		return true, 0
	}
	a := k.Addr.Unmap()
	t := &f.v6
	if a.Is4() {
		t = &f.v4
	}
	cls, port := classOther, uint16(0)
	switch k.Proto {
	case TCP:
		cls, port = classTCP, k.Port
	case UDP:
		cls, port = classUDP, k.Port
	case ICMP:
		cls = classICMP
	}
	// The first rule allowing decides: the lower line of the packet's
	// span and of the rules for the whole family.
	best, ok := lookupPort(t.whole[cls], port)
	sp := t.find(a)
	if sp != nil {
		if l, found := lookupPort(sp.ports[cls], port); found && (!ok || l < best) {
			best, ok = l, true
		}
	}
	if ok {
		return true, int(best)
	}
	near := t.wholeNear
	if sp != nil && sp.near != 0 && (near == 0 || sp.near < near) {
		near = sp.near
	}
	return false, int(near)
}

// lookupPort is the line of the range holding port, if one does.
func lookupPort(rs []portRange, port uint16) (int32, bool) {
	lo, hi := 0, len(rs)
	for lo < hi { // the first range ending at or past port
		m := int(uint(lo+hi) >> 1)
		if rs[m].hi < port {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(rs) && rs[lo].lo <= port {
		return rs[lo].line, true
	}
	return 0, false
}

// ProtoOf is the Proto of an IP protocol number, as a gateway reads it
// from a packet's header.
func ProtoOf(ipProto uint8) Proto {
	switch ipProto {
	case 6:
		return TCP
	case 17:
		return UDP
	case 1, 58:
		return ICMP
	}
	return AnyProto
}

func (t *table) find(a netip.Addr) *span {
	k := keyOf(a)
	lo, hi := 0, len(t.keys)
	for lo < hi { // the first span starting past a
		m := int(uint(lo+hi) >> 1)
		if !t.keys[m].after(k) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return nil
	}
	return &t.spans[lo-1]
}

// build cuts the family's address space at every entry's first address
// and one past its last, gives each span the entries covering it, and
// merges neighbours that came out the same.
func build(all []entry, zero netip.Addr) table {
	var t table
	var entries []entry
	var whole []int
	for i, e := range all {
		if e.pfx.Bits() == 0 {
			whole = append(whole, i)
		} else {
			entries = append(entries, e)
		}
	}
	for c := range nClasses {
		t.whole[c] = portRanges(all, whole, c)
	}
	if len(whole) > 0 {
		t.wholeNear = all[whole[0]].line // entries are in rule order
	}
	if len(entries) == 0 {
		return t
	}
	bounds := []netip.Addr{zero}
	for _, e := range entries {
		bounds = append(bounds, e.pfx.Addr())
		if end := lastAddr(e.pfx).Next(); end.IsValid() {
			bounds = append(bounds, end)
		}
	}
	slices.SortFunc(bounds, netip.Addr.Compare)
	bounds = slices.Compact(bounds)
	cover := make([][]int, len(bounds))
	for i, e := range entries {
		first, _ := slices.BinarySearchFunc(bounds, e.pfx.Addr(), netip.Addr.Compare)
		end := len(bounds)
		if next := lastAddr(e.pfx).Next(); next.IsValid() {
			end, _ = slices.BinarySearchFunc(bounds, next, netip.Addr.Compare)
		}
		for j := first; j < end; j++ {
			cover[j] = append(cover[j], i)
		}
	}
	for j, b := range bounds {
		sp := span{start: b}
		if len(cover[j]) > 0 {
			sp.near = entries[cover[j][0]].line
		}
		for c := range nClasses {
			sp.ports[c] = portRanges(entries, cover[j], c)
		}
		if n := len(t.spans); n > 0 && samePorts(&t.spans[n-1], &sp) {
			continue
		}
		t.spans = append(t.spans, sp)
		t.keys = append(t.keys, keyOf(b))
	}
	return t
}

// portRanges is the allowed port ranges of one class among the entries
// covering a span: the port line cut at every range's ends, each piece
// with the first rule's line allowing it, neighbours with one line merged.
// idx is in rule order (entries are made rule by rule), so each piece is
// painted by the first entry reaching it and skipped by the others: a
// span covered by a thousand entries costs a sort, not a million checks.
func portRanges(entries []entry, idx []int, class int) []portRange {
	var cuts []uint32
	for _, i := range idx {
		if e := &entries[i]; e.classes[class] {
			cuts = append(cuts, uint32(e.lo), uint32(e.hi)+1)
		}
	}
	if len(cuts) == 0 {
		return nil
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	pieces := len(cuts) - 1
	lines := make([]int32, pieces)
	next := make([]int, pieces+1) // next[k]: the first unpainted piece from k on
	for k := range next {
		next[k] = k
	}
	find := func(k int) int {
		for next[k] != k {
			next[k] = next[next[k]]
			k = next[k]
		}
		return k
	}
	for _, i := range idx {
		e := &entries[i]
		if !e.classes[class] {
			continue
		}
		first, _ := slices.BinarySearch(cuts, uint32(e.lo))
		end, _ := slices.BinarySearch(cuts, uint32(e.hi)+1)
		for k := find(first); k < end; k = find(k + 1) {
			lines[k] = e.line
			next[k] = k + 1
		}
	}
	var out []portRange
	for k := range pieces {
		if next[k] == k { // unpainted: no entry allows these ports
			continue
		}
		lo, hi := cuts[k], cuts[k+1]-1
		if n := len(out); n > 0 && out[n-1].line == lines[k] && uint32(out[n-1].hi)+1 == lo {
			out[n-1].hi = uint16(hi)
			continue
		}
		out = append(out, portRange{lo: uint16(lo), hi: uint16(hi), line: lines[k]})
	}
	return out
}

func samePorts(a, b *span) bool {
	if a.near != b.near {
		return false
	}
	for c := range nClasses {
		if !slices.Equal(a.ports[c], b.ports[c]) {
			return false
		}
	}
	return true
}

// lastAddr is the last address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	b := a.AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}
