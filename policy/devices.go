package policy

import (
	"net/netip"
	"strconv"
)

// Device is a device joined to a cluster: its tunnel address, which is
// how a gateway knows whose packet it holds (WireGuard's allowed IPs drop
// a packet whose source is not its peer's address), and its user.
type Device struct {
	Addr netip.Addr
	User Subject
}

// DeviceFilters is what a gateway enforces: for each device address the
// filter of its user's rules in the cluster. Users to whom the same rules
// apply share one compiled Filter, so a policy of many rules over a team
// of many users compiles once per distinct set of rules, not per user.
// Immutable once built; a gateway swaps in a new one on every change.
type DeviceFilters struct {
	open   bool // the account has no policy
	byAddr map[addrKey]*Filter
	shared int    // distinct filters compiled
	rules  []Rule // the policy's, to name the lines Verdict gives
}

// CompileDevices builds the filters of a cluster's devices.
func CompileDevices(p *Policy, cluster string, devices []Device) *DeviceFilters {
	if p == nil {
		return &DeviceFilters{open: true}
	}
	out := &DeviceFilters{byAddr: make(map[addrKey]*Filter, len(devices)), rules: p.Rules}
	byRules := map[string]*Filter{}
	for _, d := range devices {
		rules := p.applicable(d.User, cluster)
		key := rulesKey(rules)
		f, ok := byRules[key]
		if !ok {
			f = p.compile(rules)
			byRules[key] = f
		}
		out.byAddr[keyOf(d.Addr.Unmap())] = f
	}
	out.shared = len(byRules)
	return out
}

// Check reports whether the device at src may send the packet, and the
// line of the rule allowing it (0 when denied or without a policy). A
// source that is no device of the cluster is denied.
func (d *DeviceFilters) Check(src netip.Addr, k Packet) (allow bool, line int) {
	if allow, line = d.Verdict(src, k); !allow {
		return false, 0
	}
	return true, line
}

// Verdict is Check naming, for a refused packet, the rule it is counted
// against (Filter.Verdict); 0 for the default deny, and for a source that
// is no device of the cluster.
func (d *DeviceFilters) Verdict(src netip.Addr, k Packet) (allow bool, line int) {
	if d.open {
		return true, 0
	}
	f := d.byAddr[keyOf(src.Unmap())]
	if f == nil {
		return false, 0
	}
	return f.Verdict(k)
}

// Rules are the policy's rules (nil without a policy): what the lines a
// Verdict gives are.
func (d *DeviceFilters) Rules() []Rule { return d.rules }

// Filters is how many distinct filters were compiled.
func (d *DeviceFilters) Filters() int { return d.shared }

func rulesKey(rules []int) string {
	b := make([]byte, 0, 4*len(rules))
	for _, r := range rules {
		b = strconv.AppendInt(b, int64(r), 10)
		b = append(b, ',')
	}
	return string(b)
}
