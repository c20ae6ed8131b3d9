package instance

import "testing"

func TestParseOK(t *testing.T) {
	if pid, err := parseOK("ok 12"); err != nil || pid != 12 {
		t.Fatalf("%d %v", pid, err)
	}
	for _, bad := range []string{"", "ok", "ok x", "ok -1", "no 12", "ok 1 2"} {
		if _, err := parseOK(bad); err == nil {
			t.Errorf("parseOK(%q) accepted", bad)
		}
	}
}

func FuzzParseOK(f *testing.F) {
	f.Add("ok 12")
	f.Add("ok 0")
	f.Add("error unknown request")
	f.Fuzz(func(t *testing.T, s string) {
		pid, err := parseOK(s)
		if err == nil && pid <= 0 {
			t.Fatalf("accepted pid %d from %q", pid, s)
		}
	})
}
