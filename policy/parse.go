package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxSize bounds a document: a thousand rules are well under it.
const MaxSize = 1 << 20

// MaxRules bounds the rules of a document: five times the thousand a
// large team's policy is measured at, and few enough that the filters of
// the worst shape of policy (many ports on a wide prefix, many addresses
// inside it) compile in about a second.
const MaxRules = 5000

// maxErrors is how many line errors one parse reports; past it the
// document is more likely not a policy at all.
const maxErrors = 20

// LineError is a problem on one line of a document.
type LineError struct {
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("policy line %d: %s", e.Line, e.Msg) }

// lineErrors gathers a document's problems, all of them up to maxErrors.
type lineErrors []error

func (l *lineErrors) add(line int, format string, args ...any) {
	if len(*l) < maxErrors {
		*l = append(*l, &LineError{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
}

func (l lineErrors) err() error { return errors.Join(l...) }

// Parse reads a document and checks its syntax: every line a version,
// group, allow or operate statement, every address, prefix, port and
// protocol well formed. Whether its groups and clusters exist is
// Validate's question. The error lists every bad line (errors.As finds
// the first *LineError).
func Parse(src []byte) (*Policy, error) {
	if len(src) > MaxSize {
		return nil, fmt.Errorf("policy is %d bytes, over the limit of %d", len(src), MaxSize)
	}
	p := &Policy{}
	var errs lineErrors
	versionLine := 0
	for i, raw := range strings.Split(string(src), "\n") {
		n := i + 1
		line := raw
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "version":
			if versionLine != 0 {
				errs.add(n, "a second version line (the first is line %d)", versionLine)
				continue
			}
			versionLine = n
			v, err := strconv.ParseUint(rest, 10, 64)
			if err != nil || v == 0 {
				errs.add(n, "version %q is not a whole number from 1 up", rest)
				continue
			}
			p.Version = v
		case "group":
			if g, ok := parseGroup(n, rest, &errs); ok {
				p.Groups = append(p.Groups, g)
			}
		case "allow", "operate":
			if len(p.Rules) == MaxRules {
				errs.add(n, "more than %d rules: group users and merge destinations into fewer rules", MaxRules)
				return nil, errs.err()
			}
			if r, ok := parseRule(n, word, rest, &errs); ok {
				p.Rules = append(p.Rules, r)
			}
		default:
			errs.add(n, "%q is not a statement: a line is `version N`, `group NAME: EMAIL, …`, `allow WHO -> CLUSTER: WHAT` or `operate WHO -> CLUSTER: ACTIONS`", clip(word))
		}
	}
	if versionLine == 0 {
		errs.add(1, "no version line: a policy starts with `version N`")
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return p, nil
}

func parseGroup(n int, rest string, errs *lineErrors) (Group, bool) {
	name, members, ok := strings.Cut(rest, ":")
	name = strings.TrimSpace(name)
	if !ok {
		errs.add(n, "a group line is `group NAME: EMAIL, …` (no colon after %q)", clip(name))
		return Group{}, false
	}
	if !validName(name) {
		errs.add(n, "group name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", clip(name))
		return Group{}, false
	}
	g := Group{Line: n, Name: name}
	good := true
	for _, m := range splitList(members) {
		email, err := parseEmail(m)
		if err != nil {
			errs.add(n, "group %s: %v", name, err)
			good = false
			continue
		}
		g.Members = append(g.Members, email)
	}
	return g, good
}

func parseRule(n int, word, rest string, errs *lineErrors) (Rule, bool) {
	r := Rule{Line: n, Kind: Allow}
	if word == "operate" {
		r.Kind = Operate
	}
	who, target, ok := cutArrow(rest)
	if !ok {
		errs.add(n, "%s line is `%s WHO -> CLUSTER: %s` (no arrow)", word, word, what(r.Kind))
		return r, false
	}
	cluster, list, ok := strings.Cut(target, ":")
	cluster = strings.TrimSpace(cluster)
	if !ok {
		errs.add(n, "no colon after the cluster %q: write `%s: %s`", clip(cluster), clip(cluster), what(r.Kind))
		return r, false
	}
	good := true
	if cluster != AnyCluster && !validCID(cluster) {
		errs.add(n, "cluster %q: a cluster is its id (lowercase letters, digits, '-') or * for every cluster", clip(cluster))
		good = false
	}
	r.Cluster = cluster
	whos := splitList(who)
	if len(whos) == 0 {
		errs.add(n, "no one before the arrow: name group:NAME, user:EMAIL or * for everyone")
		good = false
	}
	for _, w := range whos {
		pr, err := parsePrincipal(w)
		if err != nil {
			errs.add(n, "%v", err)
			good = false
			continue
		}
		r.Principals = append(r.Principals, pr)
	}
	items := splitList(list)
	if len(items) == 0 {
		errs.add(n, "nothing after %q: name %s", clip(cluster)+":", what(r.Kind))
		good = false
	}
	for _, it := range items {
		if r.Kind == Operate {
			a, err := parseAction(it, cluster)
			if err != nil {
				errs.add(n, "%v", err)
				good = false
				continue
			}
			r.Actions = append(r.Actions, a)
			continue
		}
		d, err := ParseDest(it)
		if err != nil {
			errs.add(n, "%v", err)
			good = false
			continue
		}
		r.Dests = append(r.Dests, d)
	}
	return r, good
}

func what(k Kind) string {
	if k == Operate {
		return "ACTION, … (or *)"
	}
	return "ADDRESS[:PORT][/PROTO], … (or *)"
}

// cutArrow splits at "->" or "→".
func cutArrow(s string) (before, after string, ok bool) {
	for _, arrow := range []string{"->", "→"} {
		if b, a, ok := strings.Cut(s, arrow); ok {
			return b, a, true
		}
	}
	return "", "", false
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parsePrincipal(s string) (Principal, error) {
	if s == "*" {
		return Principal{}, nil
	}
	kind, name, _ := strings.Cut(s, ":")
	switch kind {
	case "group":
		if !validName(name) {
			return Principal{}, fmt.Errorf("group name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", clip(name))
		}
		return Principal{Group: name}, nil
	case "user":
		email, err := parseEmail(name)
		return Principal{User: email}, err
	}
	return Principal{}, fmt.Errorf("%q is not group:NAME, user:EMAIL or *", clip(s))
}

func parseAction(s, cluster string) (Action, error) {
	a := Action(s)
	if a == AllActions {
		return a, nil
	}
	for _, known := range Actions {
		if a == known {
			if AccountWide(a) && cluster != AnyCluster {
				return "", fmt.Errorf("%s is about the whole account, not one cluster: write `operate … -> *: %s`", a, a)
			}
			return a, nil
		}
	}
	names := make([]string, len(Actions))
	for i, k := range Actions {
		names[i] = string(k)
	}
	return "", fmt.Errorf("unknown operator action %q (known: %s, or * for all)", clip(s), strings.Join(names, ", "))
}

func parseEmail(s string) (string, error) {
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || domain == "" || strings.ContainsAny(s, " \t,:;<>()[]\\\"") || strings.Contains(domain, "@") {
		return "", fmt.Errorf("%q is not an email address", clip(s))
	}
	return strings.ToLower(s), nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 || !alnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func validCID(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// clip keeps an error short when a line is long or binary.
func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// CheckGroupName refuses a name a document could not use after group:.
func CheckGroupName(s string) error {
	if !validName(s) {
		return fmt.Errorf("%q is not a group name: letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64", clip(s))
	}
	return nil
}

// CheckEmail checks a member's email and returns it lowercased, as a
// document's group line keeps it.
func CheckEmail(s string) (string, error) { return parseEmail(s) }
