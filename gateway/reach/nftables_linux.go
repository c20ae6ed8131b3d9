package reach

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The ruleset goes to the kernel through nftables' netlink interface (no
// nft binary on the node): one batch deletes the table if it is there and
// makes it again, so the kernel swaps the old rules for the new in one
// transaction and no packet sees half of either.

var table = &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}

// program replaces the table with rs in one batch.
func program(rs Ruleset) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	// Adding the table first makes the delete that follows valid whether
	// or not the table was there (as `nft -f` with "table …; delete table …").
	c.AddTable(table)
	c.DelTable(table)
	c.AddTable(table)
	for _, name := range rs.Counters {
		c.AddObj(&nftables.NamedObj{Table: table, Name: name, Type: nftables.ObjTypeCounter, Obj: &expr.Counter{}})
	}
	sets := map[string]*nftables.Set{}
	for _, s := range rs.Sets {
		set := &nftables.Set{Table: table, Name: s.Name, Interval: true, KeyType: nftables.TypeIPAddr}
		if s.IPv6 {
			set.KeyType = nftables.TypeIP6Addr
		}
		if err := c.AddSet(set, intervals(s.Elems)); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
		sets[s.Name] = set
	}
	accept := nftables.ChainPolicyAccept
	for _, ch := range rs.Chains {
		hook, ok := hooks[ch.Hook]
		if !ok {
			return fmt.Errorf("chain %s: no hook %q", ch.Name, ch.Hook)
		}
		chain := c.AddChain(&nftables.Chain{Name: ch.Name, Table: table, Type: nftables.ChainType(ch.Type),
			Hooknum: hook, Priority: nftables.ChainPriorityRef(nftables.ChainPriority(ch.Priority)), Policy: &accept})
		for _, r := range ch.Rules {
			ex, err := exprs(c, r, sets)
			if err != nil {
				return fmt.Errorf("chain %s, rule %q: %w", ch.Name, r, err)
			}
			c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: ex})
		}
	}
	return c.Flush()
}

var hooks = map[string]*nftables.ChainHook{
	"prerouting":  nftables.ChainHookPrerouting,
	"output":      nftables.ChainHookOutput,
	"postrouting": nftables.ChainHookPostrouting,
}

// unprogram deletes the table (not there is no error).
func unprogram() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	c.DelTable(table)
	if err := c.Flush(); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// counters reads the table's named counters (packets).
func counters() (map[string]uint64, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, err
	}
	objs, err := c.GetNamedObjects(table)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, o := range objs {
		if n, ok := o.(*nftables.NamedObj); ok && n.Type == nftables.ObjTypeCounter {
			if ctr, ok := n.Obj.(*expr.Counter); ok {
				out[n.Name] = ctr.Packets
			}
		}
	}
	return out, nil
}

// intervals are the elements of an interval set holding ps (sorted, none
// containing another): each range's first address, and the address after
// its last marked as the end; touching ranges are one (the kernel refuses
// an end where the next range starts). A range up to the last address
// has no end mark.
func intervals(ps []netip.Prefix) []nftables.SetElement {
	var out []nftables.SetElement
	var end netip.Addr // after the last range; invalid: the last reaches the top
	for i, p := range ps {
		first := p.Masked().Addr()
		if i == 0 || first != end {
			if i > 0 && end.IsValid() {
				out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
			}
			out = append(out, nftables.SetElement{Key: first.AsSlice()})
		}
		end = lastAddr(p).Next()
	}
	if len(ps) > 0 && end.IsValid() {
		out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// mask is the netmask of a prefix of bits in an address of n bytes.
func mask(bits int, n uint32) []byte {
	b := make([]byte, n)
	for i := 0; i < bits; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return b
}

// exprs translates a rule into the kernel's expressions, as nft would.
func exprs(c *nftables.Conn, r Rule, sets map[string]*nftables.Set) ([]expr.Any, error) {
	var e []expr.Any
	cmp := func(op expr.CmpOp, data []byte) { e = append(e, &expr.Cmp{Op: op, Register: 1, Data: data}) }
	meta := func(k expr.MetaKey) { e = append(e, &expr.Meta{Key: k, Register: 1}) }
	if r.IIfName != "" {
		meta(expr.MetaKeyIIFNAME)
		cmp(expr.CmpOpEq, ifname(r.IIfName))
	}
	if r.NotIIfName != "" {
		meta(expr.MetaKeyIIFNAME)
		cmp(expr.CmpOpNeq, ifname(r.NotIIfName))
	}
	if r.OIfName != "" {
		meta(expr.MetaKeyOIFNAME)
		cmp(expr.CmpOpEq, ifname(r.OIfName))
	}
	family, alen, soff, doff := byte(unix.NFPROTO_IPV4), uint32(4), uint32(12), uint32(16)
	if r.IP == 6 {
		family, alen, soff, doff = unix.NFPROTO_IPV6, 16, 8, 24
	}
	if r.Saddr.isSet() || r.Daddr.isSet() || r.ICMPEcho || r.TProxy != 0 {
		meta(expr.MetaKeyNFPROTO)
		cmp(expr.CmpOpEq, []byte{family})
	}
	for _, a := range []struct {
		off uint32
		Addr
	}{{soff, r.Saddr}, {doff, r.Daddr}} {
		if !a.isSet() {
			continue
		}
		e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: a.off, Len: alen})
		if a.Set != "" {
			s, ok := sets[a.Set]
			if !ok {
				return nil, fmt.Errorf("no set %s", a.Set)
			}
			e = append(e, &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
			continue
		}
		if (a.Prefix.Addr().Is6() && r.IP != 6) || (a.Prefix.Addr().Is4() && r.IP != 4) {
			return nil, fmt.Errorf("%s in an IPv%d rule", a.Prefix, r.IP)
		}
		if !a.Prefix.IsSingleIP() {
			e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: alen, Mask: mask(a.Prefix.Bits(), alen), Xor: make([]byte, alen)})
		}
		cmp(expr.CmpOpEq, a.Prefix.Masked().Addr().AsSlice())
	}
	switch {
	case r.ICMPEcho:
		meta(expr.MetaKeyL4PROTO)
		cmp(expr.CmpOpEq, []byte{ProtoICMP})
		e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1})
		cmp(expr.CmpOpEq, []byte{8}) // echo-request
	case len(r.L4Protos) == 1:
		meta(expr.MetaKeyL4PROTO)
		cmp(expr.CmpOpEq, r.L4Protos[:1])
	case len(r.L4Protos) > 1:
		s := &nftables.Set{Table: table, Anonymous: true, Constant: true, KeyType: nftables.TypeInetProto}
		var el []nftables.SetElement
		for _, p := range r.L4Protos {
			el = append(el, nftables.SetElement{Key: []byte{p}})
		}
		if err := c.AddSet(s, el); err != nil {
			return nil, err
		}
		meta(expr.MetaKeyL4PROTO)
		e = append(e, &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
	}
	if r.FibLocal {
		e = append(e, &expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true})
		cmp(expr.CmpOpEq, binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL))
	}
	return statements(e, r, family)
}

func statements(e []expr.Any, r Rule, family byte) ([]expr.Any, error) {
	if r.Counter != "" {
		e = append(e, &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: r.Counter})
	}
	if r.Notrack {
		e = append(e, &expr.Notrack{})
	}
	if r.TProxy != 0 {
		e = append(e, &expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(uint16(r.TProxy))},
			&expr.TProxy{Family: family, TableFamily: unix.NFPROTO_INET, RegPort: 1})
	}
	if r.SetMark != 0 {
		e = append(e, &expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(r.SetMark)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
	}
	if r.Masquerade {
		e = append(e, &expr.Masq{})
	}
	switch r.Verdict {
	case "accept":
		e = append(e, &expr.Verdict{Kind: expr.VerdictAccept})
	case "drop":
		e = append(e, &expr.Verdict{Kind: expr.VerdictDrop})
	case "":
	default:
		return nil, fmt.Errorf("no verdict %q", r.Verdict)
	}
	return e, nil
}

// ifname is an interface name as the kernel compares it (IFNAMSIZ bytes,
// zero-padded: the whole name, not a prefix).
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}
