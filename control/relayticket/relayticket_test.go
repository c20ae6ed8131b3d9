package relayticket

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestIssueCheck(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, err := New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	c := Claims{Device: "dev-1", Session: "ses-1", CID: "ky3", NID: "n1", Expires: now.Add(2 * time.Minute)}
	tk := s.Issue(c)
	got, err := s.Check(tk, now)
	if err != nil || got != c {
		t.Fatalf("check: %+v, %v; want %+v", got, err, c)
	}
	if _, err := s.Check(tk, now.Add(2*time.Minute)); !errors.Is(err, ErrExpired) {
		t.Fatalf("at its expiry: %v", err)
	}
	other, _ := New([]byte("another secret, another control!"))
	if _, err := other.Check(tk, now); err == nil {
		t.Fatal("another secret's signer took the ticket")
	}
	// Another node's claims under the same signature are refused.
	forged := s.Issue(Claims{Device: "dev-1", Session: "ses-1", CID: "ky3", NID: "n2", Expires: c.Expires})
	p1, _, _ := strings.Cut(strings.TrimPrefix(forged, prefix), ".")
	_, sig, _ := strings.Cut(strings.TrimPrefix(tk, prefix), ".")
	if _, err := s.Check(prefix+p1+"."+sig, now); err == nil {
		t.Fatal("a payload under another payload's signature was taken")
	}
	for _, bad := range []string{"", "rt1.", "rt1.x.y", "Bearer " + tk, tk + "x"} {
		if _, err := s.Check(bad, now); err == nil {
			t.Errorf("%q was taken", bad)
		}
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("a short secret was taken")
	}
}
