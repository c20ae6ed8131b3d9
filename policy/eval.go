package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Subject is the user a question is about.
type Subject struct {
	User   string   // email
	Groups []string // from the identity provider's claim and the account's groups
	// Operator is the world file's operator flag: it grants every operator
	// action, as it did before there were operate rules. It grants no
	// reach; that is what allow rules are for.
	Operator bool
}

// Query is a question about one cluster: may the subject connect to it
// (Packet nil), or reach this address, port and protocol inside it.
type Query struct {
	Cluster string
	Packet  *Packet
}

// Decision is an answer and what decided it.
type Decision struct {
	Allow bool
	// Rule is the rule that allowed; nil when nothing in the document
	// decided (a deny by default, no policy, the world file's operator).
	Rule   *Rule
	Reason string // one line for people
}

// Decide answers a connect or reach question. The first rule in the
// document that allows decides; no rule allowing is a deny. An account
// without a policy (p nil) keeps the behaviour from before policies: every
// user of the account connects to every cluster and reaches everything.
func (p *Policy) Decide(s Subject, q Query) Decision {
	verb := "connect to " + q.Cluster
	if q.Packet != nil {
		verb = "reach " + q.Packet.String() + " in " + q.Cluster
	}
	if p == nil {
		return Decision{Allow: true, Reason: "the account has no policy: every user may " + verb}
	}
	groups, user := p.groupsOf(s), strings.ToLower(s.User)
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Kind != Allow || !r.forCluster(q.Cluster) || !r.forSubject(user, groups) {
			continue
		}
		if q.Packet == nil || r.reaches(*q.Packet) {
			return Decision{Allow: true, Rule: r, Reason: fmt.Sprintf("allowed by line %d: %s", r.Line, r)}
		}
	}
	return Decision{Reason: fmt.Sprintf("no rule lets %s %s", who(s, groups), verb)}
}

// MayOperate answers whether the subject may use an operator action on a
// cluster (cluster "" for the account-wide actions, which only a rule for
// every cluster grants).
func (p *Policy) MayOperate(s Subject, cluster string, a Action) Decision {
	if s.Operator {
		return Decision{Allow: true, Reason: "an operator in the world file may " + string(a)}
	}
	where := ""
	if cluster != "" {
		where = " in " + cluster
	}
	if p == nil {
		return Decision{Reason: "the account has no policy, and only the world file's operators may " + string(a) + where}
	}
	groups, user := p.groupsOf(s), strings.ToLower(s.User)
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Kind != Operate || !r.forSubject(user, groups) {
			continue
		}
		if r.Cluster != AnyCluster && (cluster == "" || r.Cluster != cluster) {
			continue
		}
		for _, ra := range r.Actions {
			if ra == AllActions || ra == a {
				return Decision{Allow: true, Rule: r, Reason: fmt.Sprintf("allowed by line %d: %s", r.Line, r)}
			}
		}
	}
	return Decision{Reason: fmt.Sprintf("no rule lets %s %s%s", who(s, groups), a, where)}
}

// OperateRuleFor is the first operate rule for the subject, whatever its
// actions and cluster (nil: the document gives the subject no operator
// action). The world file's operator flag is not looked at: this is about
// what the document grants, so that control can keep those it grants
// from being changed by another grant (a rule's grantee removing them).
func (p *Policy) OperateRuleFor(s Subject) *Rule {
	if p == nil {
		return nil
	}
	groups, user := p.groupsOf(s), strings.ToLower(s.User)
	for i := range p.Rules {
		if r := &p.Rules[i]; r.Kind == Operate && r.forSubject(user, groups) {
			return r
		}
	}
	return nil
}

// OperateRuleNaming is the first operate rule naming the group among its
// principals (nil: none): a member of the group holds operator actions,
// so whoever changes its members hands them out.
func (p *Policy) OperateRuleNaming(group string) *Rule {
	if p == nil {
		return nil
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Kind != Operate {
			continue
		}
		for _, pr := range r.Principals {
			if pr.Group == group {
				return r
			}
		}
	}
	return nil
}

// groupsOf is the subject's groups: those it came with and those of the
// document that list its email.
func (p *Policy) groupsOf(s Subject) map[string]bool {
	out := make(map[string]bool, len(s.Groups))
	for _, g := range s.Groups {
		out[g] = true
	}
	user := strings.ToLower(s.User)
	for _, g := range p.Groups {
		for _, m := range g.Members {
			if m == user {
				out[g.Name] = true
				break
			}
		}
	}
	return out
}

func (r *Rule) forCluster(cid string) bool { return r.Cluster == AnyCluster || r.Cluster == cid }

// forSubject reports whether the rule is for a user (lowercase email) in
// these groups.
func (r *Rule) forSubject(user string, groups map[string]bool) bool {
	for _, pr := range r.Principals {
		switch {
		case pr.Everyone():
			return true
		case pr.Group != "" && groups[pr.Group]:
			return true
		case pr.User != "" && pr.User == user:
			return true
		}
	}
	return false
}

func (r *Rule) reaches(k Packet) bool {
	for _, d := range r.Dests {
		if d.Matches(k) {
			return true
		}
	}
	return false
}

func who(s Subject, groups map[string]bool) string {
	if len(groups) == 0 {
		return s.User + " (in no group)"
	}
	return s.User + " (groups " + strings.Join(keysBool(groups), ", ") + ")"
}

func keysBool(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ParseQuery reads a question as `runos policy test --to` takes it: "ky3"
// (may the user connect) or "ky3:ADDRESS[:PORT][/PROTO]" (may the user
// reach it; a port without a protocol is TCP, an address alone asks for
// every port and protocol).
func ParseQuery(s string) (Query, error) {
	cid, rest, hasAddr := strings.Cut(s, ":")
	if !validCID(cid) {
		return Query{}, fmt.Errorf("%q: a question starts with the cluster's id, like ky3 or ky3:10.96.0.20:5432", clip(s))
	}
	q := Query{Cluster: cid}
	if !hasAddr {
		return q, nil
	}
	d, err := ParseDest(rest)
	if err != nil {
		return q, err
	}
	if !d.Prefix.IsValid() || !d.Prefix.IsSingleIP() || d.PortLo != d.PortHi && !d.AllPorts() {
		return q, fmt.Errorf("%q: ask about one address and at most one port", clip(rest))
	}
	k := Packet{Addr: d.Prefix.Addr(), Proto: d.Proto}
	switch {
	case !d.AllPorts() && d.Proto == AnyProto:
		k.Proto, k.Port = TCP, d.PortLo
	case !d.AllPorts():
		k.Port = d.PortLo
	case d.Proto == TCP || d.Proto == UDP:
		return q, fmt.Errorf("%q: name the port", clip(rest))
	}
	q.Packet = &k
	return q, nil
}
