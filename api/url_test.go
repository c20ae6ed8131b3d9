package api

import (
	"errors"
	"strings"
	"testing"
)

func TestParseControlURL(t *testing.T) {
	for _, c := range []struct {
		in        string
		allowHTTP bool
		want, err string
	}{
		{"https://198.51.100.10", false, "https://198.51.100.10", ""},
		{"https://control.example.com:8443/", false, "https://control.example.com:8443", ""},
		{"HTTPS://[2001:db8::1]:443", false, "https://[2001:db8::1]:443", ""},
		{"http://127.0.0.1:8080", true, "http://127.0.0.1:8080", ""},
		{"http://127.0.0.1:8080", false, "", "clear text"},
		{"ftp://x", true, "", "want https://host"},
		{"control.example.com", true, "", "want https://host"},
		{"https://", true, "", "want https://host"},
		{"https://u:p@h", true, "", "no user"},
		{"https://h/runos", true, "", "no user, path"},
		{"https://h/?x=1", true, "", "query"},
		{"https://h?", true, "", "query"},
		{"https://h#f", true, "", "fragment"},
	} {
		got, err := ParseControlURL(c.in, c.allowHTTP)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("ParseControlURL(%q, %v) = %q, %v; want %q", c.in, c.allowHTTP, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseControlURL(%q, %v) = %q, %v; want an error with %q", c.in, c.allowHTTP, got, err, c.err)
		}
	}
	if _, err := ParseControlURL("http://h", false); !errors.Is(err, ErrPlainHTTP) || !strings.Contains(err.Error(), "--insecure-http") {
		t.Errorf("plain HTTP refusal = %v: want ErrPlainHTTP naming --insecure-http", err)
	}
}

// A client never sends a token to an http:// control unless its process
// allowed plain HTTP at start.
func TestNewClientRefusesPlainHTTP(t *testing.T) {
	if _, err := NewClient("http://198.51.100.10", "tok", ""); !errors.Is(err, ErrPlainHTTP) {
		t.Fatalf("NewClient(http://…) = %v, want ErrPlainHTTP", err)
	}
	c, err := NewClient("http://198.51.100.10/", "tok", "", AllowHTTP(true))
	if err != nil || c.BaseURL != "http://198.51.100.10" {
		t.Fatalf("NewClient(http://…, AllowHTTP) = %+v, %v", c, err)
	}
}
