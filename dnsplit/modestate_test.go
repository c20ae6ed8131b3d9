package dnsplit

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
)

// apply hands set the normalized routes, keeps the last outcome for Status,
// and refuses a bad route before set sees anything.
func TestModeStateApply(t *testing.T) {
	s := newModeState(ModeNRPT, "test")
	var got []Route
	set := func(rs []Route) error { got = rs; return nil }
	if err := s.apply([]Route{{CID: "ky3", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{".Ky3.Example."}}}, set); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !slices.Equal(got[0].Domains, []string{"ky3.example"}) {
		t.Errorf("set got %+v, want the normalized route", got)
	}
	if st := s.Status(); st != (Status{Mode: ModeNRPT, Reason: "test"}) {
		t.Errorf("status %+v", st)
	}

	if err := s.apply(nil, func([]Route) error { return errors.New("access is denied") }); err == nil {
		t.Fatal("the error of set is lost")
	}
	if st := s.Status(); st.Error != "access is denied" {
		t.Errorf("status error %q, want set's", st.Error)
	}

	got = nil
	if err := s.apply([]Route{{CID: "bad", Domains: []string{"x.example"}}}, set); err == nil || got != nil {
		t.Fatalf("a route without a server: err %v, set got %+v", err, got)
	}
	if s.Status().Error == "" {
		t.Error("status does not report the refused route")
	}

	if err := s.apply(nil, set); err != nil || s.Status().Error != "" {
		t.Errorf("a Set that works: err %v, status error %q; want both cleared", err, s.Status().Error)
	}
}
