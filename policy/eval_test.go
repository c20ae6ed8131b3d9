package policy

import (
	"net/netip"
	"strings"
	"testing"
)

const teamPolicy = `# the team of the issue
version 3

group oncall: Ada@Example.com, bob@example.com
group contractors: carl@example.com

allow group:oncall -> ky3: *
allow * -> staging: *
allow group:contractors -> ky3: 10.96.0.20:5432
allow group:contractors -> ky3: 10.96.1.0/24:8000-8080/tcp, [fd00::20]:53/udp, 10.96.2.1/icmp
allow user:dan@example.com, group:sre -> *: 10.0.0.0/8:22
operate group:oncall -> ky3: move-services, revoke-devices
operate group:admins → *: *
`

var known = Known{Clusters: []string{"ky3", "staging", "xym"}, Groups: []string{"sre", "admins"}}

func mustLoad(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Load([]byte(src), known)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pkt(s string, proto Proto, port uint16) *Packet {
	return &Packet{Addr: netip.MustParseAddr(s), Proto: proto, Port: port}
}

func TestDecide(t *testing.T) {
	p := mustLoad(t, teamPolicy)
	ada := Subject{User: "ada@example.com"} // in oncall by the document, case aside
	carl := Subject{User: "carl@example.com"}
	eve := Subject{User: "eve@example.com"}
	dan := Subject{User: "dan@example.com"}
	sre := Subject{User: "sam@example.com", Groups: []string{"sre"}} // from the provider
	for _, c := range []struct {
		name  string
		s     Subject
		q     Query
		allow bool
		line  int
	}{
		{"oncall connects to ky3", ada, Query{Cluster: "ky3"}, true, 7},
		{"oncall reaches anything in ky3", ada, Query{"ky3", pkt("10.96.9.9", UDP, 9999)}, true, 7},
		{"oncall may not connect to xym", ada, Query{Cluster: "xym"}, false, 0},
		{"everyone connects to staging", eve, Query{Cluster: "staging"}, true, 8},
		{"everyone reaches ICMP in staging", eve, Query{"staging", pkt("10.1.1.1", ICMP, 0)}, true, 8},
		{"a stranger may not connect to ky3", eve, Query{Cluster: "ky3"}, false, 0},
		{"a contractor connects to ky3", carl, Query{Cluster: "ky3"}, true, 9},
		{"a contractor reaches the database over TCP", carl, Query{"ky3", pkt("10.96.0.20", TCP, 5432)}, true, 9},
		{"a port without protocol is UDP too", carl, Query{"ky3", pkt("10.96.0.20", UDP, 5432)}, true, 9},
		{"but not another port", carl, Query{"ky3", pkt("10.96.0.20", TCP, 5433)}, false, 0},
		{"nor ICMP to it", carl, Query{"ky3", pkt("10.96.0.20", ICMP, 0)}, false, 0},
		{"nor another address", carl, Query{"ky3", pkt("10.96.0.21", TCP, 5432)}, false, 0},
		{"prefix and port range, low end", carl, Query{"ky3", pkt("10.96.1.0", TCP, 8000)}, true, 10},
		{"prefix and port range, high end", carl, Query{"ky3", pkt("10.96.1.255", TCP, 8080)}, true, 10},
		{"past the range", carl, Query{"ky3", pkt("10.96.1.7", TCP, 8081)}, false, 0},
		{"tcp only", carl, Query{"ky3", pkt("10.96.1.7", UDP, 8000)}, false, 0},
		{"IPv6 UDP port", carl, Query{"ky3", pkt("fd00::20", UDP, 53)}, true, 10},
		{"IPv6 TCP refused", carl, Query{"ky3", pkt("fd00::20", TCP, 53)}, false, 0},
		{"ICMP only to the address given", carl, Query{"ky3", pkt("10.96.2.1", ICMP, 0)}, true, 10},
		{"ICMP rule gives no TCP", carl, Query{"ky3", pkt("10.96.2.1", TCP, 80)}, false, 0},
		{"a mapped IPv4 address is IPv4", carl, Query{"ky3", pkt("::ffff:10.96.0.20", TCP, 5432)}, true, 9},
		{"a contractor may not connect to staging's neighbour", carl, Query{Cluster: "xym"}, false, 0},
		{"a user rule on every cluster", dan, Query{"xym", pkt("10.3.4.5", TCP, 22)}, true, 11},
		{"a provider group", sre, Query{"staging", pkt("10.3.4.5", TCP, 22)}, true, 8},
		{"a provider group on every cluster", sre, Query{"xym", pkt("10.3.4.5", TCP, 22)}, true, 11},
		{"a provider group, wrong port", sre, Query{"xym", pkt("10.3.4.5", TCP, 23)}, false, 0},
		{"other protocols need a whole-address rule", carl, Query{"ky3", pkt("10.96.0.20", AnyProto, 0)}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := p.Decide(c.s, c.q)
			line := 0
			if d.Rule != nil {
				line = d.Rule.Line
			}
			if d.Allow != c.allow || line != c.line {
				t.Errorf("Decide = allow %v by line %d (%s), want allow %v by line %d", d.Allow, line, d.Reason, c.allow, c.line)
			}
			if c.allow && !strings.HasPrefix(d.Reason, "allowed by line") || !c.allow && !strings.Contains(d.Reason, c.s.User) {
				t.Errorf("reason %q does not say what decided", d.Reason)
			}
		})
	}
}

func TestNoPolicyKeepsEveryoneIn(t *testing.T) {
	var p *Policy
	if d := p.Decide(Subject{User: "x@y.z"}, Query{"ky3", pkt("10.0.0.1", TCP, 1)}); !d.Allow || d.Rule != nil {
		t.Errorf("no policy: %+v", d)
	}
	if ok, _ := Compile(p, Subject{User: "x@y.z"}, "ky3").Check(*pkt("10.0.0.1", UDP, 7)); !ok {
		t.Error("no policy: the filter refuses")
	}
	if d := p.MayOperate(Subject{User: "x@y.z"}, "ky3", RevokeDevices); d.Allow {
		t.Error("no policy: a user who is not the world file's operator may operate")
	}
	if d := p.MayOperate(Subject{User: "x@y.z", Operator: true}, "ky3", RevokeDevices); !d.Allow {
		t.Error("no policy: the world file's operator may not operate")
	}
}

func TestEmptyPolicyDeniesAll(t *testing.T) {
	p := mustLoad(t, "version 1\n")
	if d := p.Decide(Subject{User: "x@y.z"}, Query{Cluster: "ky3"}); d.Allow {
		t.Errorf("a policy without rules lets a user connect: %s", d.Reason)
	}
	if ok, _ := Compile(p, Subject{User: "x@y.z"}, "ky3").Check(*pkt("10.0.0.1", TCP, 80)); ok {
		t.Error("a policy without rules: the filter allows")
	}
}

func TestMayOperate(t *testing.T) {
	p := mustLoad(t, teamPolicy)
	ada := Subject{User: "ada@example.com"}
	admin := Subject{User: "root@example.com", Groups: []string{"admins"}}
	worldOp := Subject{User: "op@example.com", Operator: true}
	for _, c := range []struct {
		name    string
		s       Subject
		cluster string
		a       Action
		allow   bool
		line    int
	}{
		{"oncall moves services in ky3", ada, "ky3", MoveServices, true, 12},
		{"oncall revokes devices in ky3", ada, "ky3", RevokeDevices, true, 12},
		{"oncall may not remove nodes", ada, "ky3", ManageNodes, false, 0},
		{"oncall may not move services elsewhere", ada, "xym", MoveServices, false, 0},
		{"account-wide needs a rule for every cluster", ada, "", SetPolicy, false, 0},
		{"admins do everything everywhere", admin, "xym", ManageNodes, true, 13},
		{"admins set the policy", admin, "", SetPolicy, true, 13},
		{"the world file's operator still operates", worldOp, "", ManageTokens, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := p.MayOperate(c.s, c.cluster, c.a)
			line := 0
			if d.Rule != nil {
				line = d.Rule.Line
			}
			if d.Allow != c.allow || line != c.line {
				t.Errorf("MayOperate = allow %v by line %d (%s), want %v by line %d", d.Allow, line, d.Reason, c.allow, c.line)
			}
		})
	}
	if d := p.Decide(worldOp, Query{Cluster: "ky3"}); d.Allow {
		t.Errorf("the world file's operator flag grants reach: %s", d.Reason)
	}
}

func TestParseQuery(t *testing.T) {
	for in, want := range map[string]string{
		"ky3":                    "ky3 connect",
		"ky3:10.96.0.20:5432":    "ky3 10.96.0.20:5432/tcp",
		"ky3:10.96.0.20:53/udp":  "ky3 10.96.0.20:53/udp",
		"ky3:10.96.0.20/icmp":    "ky3 10.96.0.20/icmp",
		"ky3:10.96.0.20":         "ky3 10.96.0.20",
		"ky3:[fd00::1]:443":      "ky3 [fd00::1]:443/tcp",
		"ky3:10.96.0.0/16:5432":  "error",
		"ky3:10.96.0.20:1-2":     "error",
		"ky3:*":                  "error",
		"ky3:10.96.0.20/tcp":     "error",
		"KY3":                    "error",
		"ky3:10.96.0.20:99999":   "error",
		"ky3:10.96.0.20:80/icmp": "error",
	} {
		q, err := ParseQuery(in)
		got := "error"
		if err == nil {
			got = q.Cluster + " connect"
			if q.Packet != nil {
				got = q.Cluster + " " + q.Packet.String()
			}
		}
		if got != want {
			t.Errorf("ParseQuery(%q) = %s (%v), want %s", in, got, err, want)
		}
	}
}

// OperateRuleFor and OperateRuleNaming say whom the document hands
// operator actions to, and through which group: control keeps a rule's
// grantee from changing either.
func TestWhomTheDocumentLetsOperate(t *testing.T) {
	p := mustLoad(t, teamPolicy)
	for _, c := range []struct {
		name string
		s    Subject
		line int
	}{
		{"in oncall by the document", Subject{User: "Bob@example.com"}, 12},
		{"in admins by the provider", Subject{User: "root@example.com", Groups: []string{"admins"}}, 13},
		{"allowed to connect, granted nothing", Subject{User: "carl@example.com"}, 0},
		{"the world file's operator is not the document's", Subject{User: "op@example.com", Operator: true}, 0},
	} {
		line := 0
		if r := p.OperateRuleFor(c.s); r != nil {
			line = r.Line
		}
		if line != c.line {
			t.Errorf("%s: OperateRuleFor = line %d, want %d", c.name, line, c.line)
		}
	}
	everyone := mustLoad(t, "version 1\noperate * -> ky3: move-services\n")
	if r := everyone.OperateRuleFor(Subject{User: "eve@example.com"}); r == nil || r.Line != 2 {
		t.Errorf("operate * is for everyone: %v", r)
	}
	for group, line := range map[string]int{"oncall": 12, "admins": 13, "contractors": 0, "sre": 0} {
		got := 0
		if r := p.OperateRuleNaming(group); r != nil {
			got = r.Line
		}
		if got != line {
			t.Errorf("OperateRuleNaming(%s) = line %d, want %d", group, got, line)
		}
	}
	var none *Policy
	if none.OperateRuleFor(Subject{User: "eve@example.com"}) != nil || none.OperateRuleNaming("oncall") != nil {
		t.Error("no policy grants nothing")
	}
}
