package policy

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestParseErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct {
		src  string
		line int
		want string
	}{
		{"allow * -> ky3: *", 1, "no version line"},
		{"version 1\nversion 2", 2, "a second version line"},
		{"version 0", 1, "not a whole number"},
		{"version -3", 1, "not a whole number"},
		{"version 1\npermit * -> ky3: *", 2, `"permit" is not a statement`},
		{"version 1\nallow * ky3: *", 2, "no arrow"},
		{"version 1\nallow * -> ky3 *", 2, "no colon after the cluster"},
		{"version 1\nallow -> ky3: *", 2, "no one before the arrow"},
		{"version 1\nallow * -> ky3:", 2, "nothing after"},
		{"version 1\nallow * -> Ky3: *", 2, `cluster "Ky3"`},
		{"version 1\nallow team:x -> ky3: *", 2, `"team:x" is not group:NAME`},
		{"version 1\nallow group:-x -> ky3: *", 2, `group name "-x"`},
		{"version 1\nallow user:nobody -> ky3: *", 2, `"nobody" is not an email`},
		{"version 1\n\nallow * -> ky3: 10.96.0.300", 3, `"10.96.0.300" is not an IP address`},
		{"version 1\nallow * -> ky3: 10.96.0.0/33", 2, "is not a prefix"},
		{"version 1\nallow * -> ky3: 10.96.0.5/16", 2, "did you mean 10.96.0.0/16"},
		{"version 1\nallow * -> ky3: 10.96.0.20:0", 2, `port "0"`},
		{"version 1\nallow * -> ky3: 10.96.0.20:65536", 2, `port "65536"`},
		{"version 1\nallow * -> ky3: 10.96.0.20:443-80", 2, "runs backwards"},
		{"version 1\nallow * -> ky3: 10.96.0.20:", 2, "no port after"},
		{"version 1\nallow * -> ky3: 10.96.0.20:80/sctp", 2, `unknown protocol "sctp"`},
		{"version 1\nallow * -> ky3: 10.96.0.20:80/icmp", 2, "ICMP has no ports"},
		{"version 1\nallow * -> ky3: [fd00::1:443", 2, "no closing"},
		{"version 1\nallow * -> ky3: ::ffff:10.0.0.1", 2, "write an IPv4 address as IPv4"},
		{"version 1\nallow * -> ky3: fe80::1%eth0", 2, "is not an IP address"},
		{"version 1\ngroup oncall ada@example.com", 2, "no colon"},
		{"version 1\ngroup oncall: ada", 2, `"ada" is not an email`},
		{"version 1\noperate * -> ky3: reboot", 2, `unknown operator action "reboot"`},
		{"version 1\noperate * -> ky3: set-policy", 2, "about the whole account"},
	} {
		_, err := Parse([]byte(c.src))
		var le *LineError
		if !errors.As(err, &le) || le.Line != c.line || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want line %d saying %q", c.src, err, c.line, c.want)
		}
	}
}

func TestValidateNamesTheLine(t *testing.T) {
	for _, c := range []struct {
		src  string
		line int
		want string
	}{
		{"version 1\nallow group:oncal -> ky3: *", 2, `unknown group "oncal" (known groups: admins, sre)`},
		{"version 1\ngroup oncall: a@b.c\n\nallow group:oncal -> ky3: *", 4, "known groups: admins, oncall, sre"},
		{"version 1\nallow * -> ky4: *", 2, `unknown cluster "ky4" (known clusters: ky3, staging, xym`},
		{"version 1\noperate group:nope -> *: *", 2, `unknown group "nope"`},
		{"version 1\ngroup a: x@y.z\ngroup a: y@y.z", 3, "already defined on line 2"},
	} {
		_, err := Load([]byte(c.src), known)
		var le *LineError
		if !errors.As(err, &le) || le.Line != c.line || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%q) = %v, want line %d saying %q", c.src, err, c.line, c.want)
		}
	}
}

func TestEveryBadLineIsReported(t *testing.T) {
	_, err := Parse([]byte("version 1\nallow * -> ky3: 1.2.3\nallow * -> ky3: *\nallow * -> ky3: :80"))
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("want lines 2 and 4 named, got %v", err)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	p := mustLoad(t, teamPolicy)
	out := p.Format()
	q, err := Load(out, known)
	if err != nil {
		t.Fatalf("the formatted policy does not load: %v\n%s", err, out)
	}
	if !bytes.Equal(q.Format(), out) {
		t.Errorf("format is not stable:\n%s\n---\n%s", out, q.Format())
	}
	for _, want := range []string{"group oncall: ada@example.com, bob@example.com", "allow group:contractors -> ky3: 10.96.1.0/24:8000-8080/tcp, [fd00::20]:53/udp, 10.96.2.1/icmp", "operate group:admins -> *: *"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("formatted policy lacks %q:\n%s", want, out)
		}
	}
}

func TestCheckNewer(t *testing.T) {
	v3 := mustLoad(t, "version 3\n")
	v4 := mustLoad(t, "version 4\n")
	if err := CheckNewer(nil, v3); err != nil {
		t.Errorf("the first policy is refused: %v", err)
	}
	if err := CheckNewer(v3, v4); err != nil {
		t.Errorf("a newer version is refused: %v", err)
	}
	for _, old := range []*Policy{v3, mustLoad(t, "version 2\n")} {
		if err := CheckNewer(v3, old); err == nil || !strings.Contains(err.Error(), "not newer than version 3") {
			t.Errorf("version %d over 3: %v", old.Version, err)
		}
	}
}

func TestParseTooLarge(t *testing.T) {
	if _, err := Parse(make([]byte, MaxSize+1)); err == nil {
		t.Error("an oversized document parses")
	}
	src := "version 1\n" + strings.Repeat("allow * -> ky3: *\n", MaxRules)
	if _, err := Parse([]byte(src)); err != nil {
		t.Errorf("%d rules: %v", MaxRules, err)
	}
	_, err := Parse([]byte(src + "allow * -> ky3: *\n"))
	var le *LineError
	if !errors.As(err, &le) || le.Line != MaxRules+2 || !strings.Contains(err.Error(), "more than") {
		t.Errorf("%d rules: %v", MaxRules+1, err)
	}
}

// FuzzParse: whatever parses formats to a document that parses to the
// same format (every field of every statement goes through the fuzzer's
// mutations of the seeds), and Decide and the compiled filter agree on it.
func FuzzParse(f *testing.F) {
	f.Add([]byte(teamPolicy))
	f.Add([]byte("version 1\nallow * -> *: *"))
	f.Add([]byte("version 18446744073709551615\ngroup a.b_c-d: x@y.z,\nallow user:x@y.z, * -> a-1: [::]:1-65535/udp, ::/0, 0.0.0.0/0:*/tcp"))
	f.Add([]byte("version 2\noperate group:g -> *: manage-users, read-audit, manage-tokens\n# c"))
	f.Add([]byte("ky3:[fd00::1]:443/udp"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The same bytes as a question of runos policy test --to: what
		// parses asks about one address, and says it back the same.
		if q, err := ParseQuery(string(data)); err == nil && q.Packet != nil {
			again, err := ParseQuery(q.Cluster + ":" + q.Packet.String())
			if err != nil || *again.Packet != *q.Packet {
				t.Fatalf("query %q → %s → %v, %v", data, q.Packet, again.Packet, err)
			}
		}
		p, err := Parse(data)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) && len(data) <= MaxSize {
				t.Fatalf("an error without a line: %v", err)
			}
			return
		}
		_ = p.Validate(Known{Clusters: []string{"a-1", "ky3"}, Groups: []string{"g"}})
		out := p.Format()
		q, err := Parse(out)
		if err != nil {
			t.Fatalf("the formatted policy does not parse: %v\n%s", err, out)
		}
		if !bytes.Equal(q.Format(), out) {
			t.Fatalf("format is not stable:\n%s\n---\n%s", out, q.Format())
		}
		s := Subject{User: "x@y.z", Groups: []string{"g"}}
		for _, k := range probes {
			for _, cid := range []string{"a-1", "ky3"} {
				d := p.Decide(s, Query{Cluster: cid, Packet: &k})
				ok, line := Compile(p, s, cid).Check(k)
				if ok != d.Allow || ok && line != d.Rule.Line {
					t.Fatalf("%s %s: filter says %v by line %d, Decide %s", cid, k, ok, line, d.Reason)
				}
			}
		}
	})
}
