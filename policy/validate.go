package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Validate checks the document's names against the account: every group a
// rule names is defined in the document or known, every cluster is one of
// the account's, no group is defined twice. The error lists every bad line.
func (p *Policy) Validate(k Known) error {
	var errs lineErrors
	groups := map[string]int{} // name → line defined, 0: known outside
	for _, g := range k.Groups {
		groups[g] = 0
	}
	for _, g := range p.Groups {
		if line, ok := groups[g.Name]; ok && line != 0 {
			errs.add(g.Line, "group %s is already defined on line %d", g.Name, line)
			continue
		}
		groups[g.Name] = g.Line
	}
	for _, r := range p.Rules {
		for _, pr := range r.Principals {
			if _, ok := groups[pr.Group]; pr.Group != "" && !ok {
				errs.add(r.Line, "unknown group %q (%s)", pr.Group, choices("groups", keys(groups)))
			}
		}
		if r.Cluster != AnyCluster && !slices.Contains(k.Clusters, r.Cluster) {
			errs.add(r.Line, "unknown cluster %q (%s, or * for every cluster)", r.Cluster, choices("clusters", k.Clusters))
		}
	}
	return errs.err()
}

// Load parses and validates a document.
func Load(src []byte, k Known) (*Policy, error) {
	p, err := Parse(src)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(k); err != nil {
		return nil, err
	}
	return p, nil
}

// CheckNewer refuses to replace the document in force (nil: none yet) by
// next unless next carries a higher version. Versions make a set
// conditional on what its author last read: an edit of an old copy, or a
// captured document replayed later, is refused rather than silently
// undoing the changes made since.
func CheckNewer(current, next *Policy) error {
	if current == nil || next.Version > current.Version {
		return nil
	}
	return fmt.Errorf("policy version %d is not newer than version %d in force: get the current policy, edit it, and set it with a higher version",
		next.Version, current.Version)
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func choices(what string, names []string) string {
	if len(names) == 0 {
		return "the account has no " + what
	}
	const most = 10
	shown := slices.Clone(names)
	slices.Sort(shown)
	more := ""
	if len(shown) > most {
		more = fmt.Sprintf(" and %d more", len(shown)-most)
		shown = shown[:most]
	}
	return "known " + what + ": " + strings.Join(shown, ", ") + more
}

// Format writes the document in the canonical form Parse reads, with the
// groups first and the rules in their order (comments are not kept).
func (p *Policy) Format() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "version %d\n", p.Version)
	if len(p.Groups) > 0 {
		b.WriteString("\n")
	}
	for _, g := range p.Groups {
		fmt.Fprintf(&b, "group %s: %s\n", g.Name, strings.Join(g.Members, ", "))
	}
	if len(p.Rules) > 0 {
		b.WriteString("\n")
	}
	for _, r := range p.Rules {
		b.WriteString(r.String() + "\n")
	}
	return []byte(b.String())
}

// String writes the rule as one line of the document.
func (r Rule) String() string {
	who := make([]string, len(r.Principals))
	for i, pr := range r.Principals {
		who[i] = pr.String()
	}
	var what []string
	if r.Kind == Operate {
		for _, a := range r.Actions {
			what = append(what, string(a))
		}
	} else {
		for _, d := range r.Dests {
			what = append(what, d.String())
		}
	}
	return fmt.Sprintf("%s %s -> %s: %s", r.Kind, strings.Join(who, ", "), r.Cluster, strings.Join(what, ", "))
}

func (p Principal) String() string {
	switch {
	case p.Group != "":
		return "group:" + p.Group
	case p.User != "":
		return "user:" + p.User
	}
	return "*"
}
