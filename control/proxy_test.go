package control

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestBehindProxies(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("198.51.100.10/32")}
	var seen string
	h := behindProxies(trusted, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr }))
	for _, c := range []struct {
		remote string
		xff    []string
		want   string
	}{
		{"198.51.100.10:5000", []string{"203.0.113.7"}, "203.0.113.7:0"},
		// The balancer appends: the last entry is the one it saw.
		{"198.51.100.10:5000", []string{"1.2.3.4, 203.0.113.7"}, "203.0.113.7:0"},
		{"198.51.100.10:5000", []string{"6.6.6.6", "203.0.113.8"}, "203.0.113.8:0"},
		// Not from the balancer: the header is the client's say, ignored.
		{"203.0.113.9:5000", []string{"10.0.0.1"}, "203.0.113.9:5000"},
		{"198.51.100.10:5000", nil, "198.51.100.10:5000"},
		{"198.51.100.10:5000", []string{"garbage"}, "198.51.100.10:5000"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if seen != c.want {
			t.Errorf("from %s with %q: %s, want %s", c.remote, c.xff, seen, c.want)
		}
	}
}

func TestStoreURLs(t *testing.T) {
	for u, want := range map[string]string{
		"sqlite:/var/lib/c.db":                     "sqlite /var/lib/c.db",
		"sqlite:///var/lib/c.db":                   "sqlite /var/lib/c.db",
		"postgres://runos:pw@db:5432/runos":        "postgres postgres://runos:pw@db:5432/runos",
		"postgresql://runos@db/runos?sslmode=none": "postgres postgresql://runos@db/runos?sslmode=none",
	} {
		kind, rest, err := storeKind(u)
		if err != nil || kind+" "+rest != want {
			t.Errorf("storeKind(%q) = %s %s, %v", u, kind, rest, err)
		}
	}
	for _, bad := range []string{"", "sqlite:", "mysql://root:pw@db/x", "/var/lib/c.db", "pw@x:y"} {
		_, _, err := storeKind(bad)
		if err == nil || strings.Contains(err.Error(), "pw") {
			t.Errorf("storeKind(%q): %v", bad, err)
		}
	}
	if got := RedactStore("postgres://runos:s3cret@db/runos"); strings.Contains(got, "s3cret") {
		t.Errorf("redacted: %s", got)
	}
}
