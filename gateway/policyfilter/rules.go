package policyfilter

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/runos/vpn/policy"
)

// Refusals per rule, for the gateway's metrics (issue 23: "refused packets
// are counted per rule"). The policy has only allow rules, so no rule
// refuses a packet itself: a refusal is counted against the first rule of
// the device's user whose destinations hold the packet's address (refused
// for its port or protocol: the rule to widen if it was wrong), or against
// the default deny when no rule reaches that address (policy.Filter.Verdict).
//
// The counters are made when a map's filters are set, one per allow rule,
// and a refusal costs one atomic add. A rule is known by its line and its
// text: a new version that keeps a rule keeps its counter (a counter never
// goes back), and a rule that left the policy keeps its count (zero ones are
// forgotten a version later, once no batch can still be counting on the
// tables they were in), so the counters grow only with the rules that
// ever refused. Their sum is every refusal: no second counter per packet.

// DefaultDeny is the Rule of RuleDrops for refusals no rule came near: an
// address none of the user's rules reaches, a source that is no device of
// the cluster, what is not an IP packet.
const DefaultDeny = "default deny"

// RuleDrops is how many packets were refused against one rule.
type RuleDrops struct {
	Line    int    // the rule's line in its policy document; 0 for DefaultDeny
	Rule    string // the rule as a line of the document, or DefaultDeny
	Packets uint64
}

type ruleKey struct {
	line int
	rule string
}

// counters are the counters of a policy's allow rules by line ([0]: the
// default deny's), made or found again in f.rules.
func (f *Filter) counters(rules []policy.Rule) []*atomic.Uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rules == nil {
		f.rules = map[ruleKey]*atomic.Uint64{}
	}
	last := 0
	for _, r := range rules {
		last = max(last, r.Line)
	}
	byLine := make([]*atomic.Uint64, last+1)
	inForce := map[ruleKey]bool{}
	get := func(k ruleKey) *atomic.Uint64 {
		inForce[k] = true
		c := f.rules[k]
		if c == nil {
			c = new(atomic.Uint64)
			f.rules[k] = c
		}
		return c
	}
	byLine[0] = get(ruleKey{0, DefaultDeny})
	for _, r := range rules {
		if r.Kind == policy.Allow {
			byLine[r.Line] = get(ruleKey{r.Line, r.String()})
		}
	}
	for k, c := range f.rules {
		if !inForce[k] && !f.inForce[k] && c.Load() == 0 {
			delete(f.rules, k)
		}
	}
	f.inForce = inForce
	return byLine
}

// refused counts a refusal against the rule on line (0: the default deny).
func (t *tables) refused(line int) {
	if line <= 0 || line >= len(t.byLine) || t.byLine[line] == nil {
		line = 0
	}
	if len(t.byLine) > 0 {
		t.byLine[line].Add(1)
	}
}

// RuleDrops lists the rules that refused packets since the start, by line.
func (f *Filter) RuleDrops() []RuleDrops {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []RuleDrops
	for k, c := range f.rules {
		if n := c.Load(); n > 0 {
			out = append(out, RuleDrops{Line: k.line, Rule: k.rule, Packets: n})
		}
	}
	slices.SortFunc(out, func(a, b RuleDrops) int { return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Rule, b.Rule)) })
	return out
}
