package resume

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func claims(now time.Time) Claims {
	return Claims{Device: "dev-1", Session: "ses-1", User: "ann@example.com", Hash: "h1", SesVer: 7,
		SessionExpires: now.Add(24 * time.Hour), Expires: now.Add(time.Hour)}
}

func TestIssueCheck(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, err := New(secret)
	if err != nil {
		t.Fatal(err)
	}
	c := claims(now)
	tk := s.Issue(c)
	got, err := s.Check(tk, now)
	if err != nil || got != c {
		t.Fatalf("check: %+v, %v; want %+v", got, err, c)
	}
	if _, err := s.Check(tk, now.Add(time.Hour)); !errors.Is(err, ErrExpired) {
		t.Fatalf("at its expiry: %v", err)
	}
	short := c
	short.SessionExpires = now.Add(time.Minute)
	if _, err := s.Check(s.Issue(short), now.Add(time.Minute)); !errors.Is(err, ErrExpired) {
		t.Fatalf("after its session lapsed: %v", err)
	}
}

func TestForgedRefused(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := New(secret)
	tk := s.Issue(claims(now))
	other, _ := New([]byte("another secret, another control!"))
	if _, err := other.Check(tk, now); err == nil {
		t.Fatal("another secret's signer took the token")
	}
	// Another device's claims under this token's signature are refused.
	c := claims(now)
	c.Device = "dev-2"
	p2, _, _ := strings.Cut(strings.TrimPrefix(s.Issue(c), prefix), ".")
	_, sig, _ := strings.Cut(strings.TrimPrefix(tk, prefix), ".")
	if _, err := s.Check(prefix+p2+"."+sig, now); err == nil {
		t.Fatal("a payload under another payload's signature was taken")
	}
	for _, bad := range []string{"", "rs1.", "rs1.x.y", "rt1." + strings.TrimPrefix(tk, prefix), "Bearer " + tk, tk + "x",
		prefix + strings.Repeat("a", 2048) + "." + sig} {
		if _, err := s.Check(bad, now); err == nil {
			t.Errorf("%.40q was taken", bad)
		}
	}
	// Signed but missing what it must name.
	if _, err := s.Check(s.Issue(Claims{Device: "dev-1", Expires: now.Add(time.Hour), SessionExpires: now.Add(time.Hour)}), now); err == nil {
		t.Fatal("a token naming no session was taken")
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("a short secret was taken")
	}
}

// FuzzCheck: whatever a client sends as its resume token, Check neither
// panics nor takes what this signer did not issue.
func FuzzCheck(f *testing.F) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := New(secret)
	good := s.Issue(claims(now))
	f.Add(good)
	f.Add("")
	f.Add("rs1.")
	f.Add("rs1.e30.AAAA")
	f.Add(good[:len(good)-3])
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := s.Check(tok, now)
		if err != nil {
			return
		}
		if c.Device == "" || c.Session == "" || c.User == "" || c.Hash == "" {
			t.Fatalf("took %q with claims %+v", tok, c)
		}
	})
}
