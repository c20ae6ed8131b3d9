package relay

import (
	"net/http"
	"net/url"
	"testing"
)

func TestPortalOf(t *testing.T) {
	resp := func(code int, loc string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}, Request: &http.Request{URL: &url.URL{Scheme: "http", Host: "10.77.0.21", Path: "/"}}}
		if loc != "" {
			r.Header.Set("Location", loc)
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		r      *http.Response
		portal string
		found  bool
	}{
		{"the node's page", resp(200, ""), "", false},
		{"the node's redirect to HTTPS", resp(301, "https://10.77.0.21/"), "", false},
		{"a relative redirect", resp(302, "/login"), "", false},
		{"a portal's redirect", resp(302, "http://portal.hotel.example/login?from=x"), "http://portal.hotel.example", true},
		{"network authentication required", resp(511, ""), "", true},
		{"not found", resp(404, ""), "", false},
	} {
		portal, found := portalOf(tc.r, "10.77.0.21")
		if portal != tc.portal || found != tc.found {
			t.Errorf("%s: %q %v, want %q %v", tc.name, portal, found, tc.portal, tc.found)
		}
	}
}
