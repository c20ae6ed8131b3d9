package vpnd

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/runos/vpn/control/api"
)

func TestParseRequests(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"apiUrl":"https://198.51.100.10","accessToken":"abc","expiresAt":"2030-01-01T00:00:00Z"}`, true},
		{`{"apiUrl":"https://198.51.100.10/","accessToken":"abc"}`, true},
		{`{"apiUrl":"http://127.0.0.1:8080","accessToken":"abc","extra":1}`, true},
		{`{"apiUrl":"ftp://x","accessToken":"abc"}`, false},
		{`{"apiUrl":"https://u:p@x","accessToken":"abc"}`, false},
		{`{"apiUrl":"https://x/v1","accessToken":"abc"}`, false},
		{`{"apiUrl":"https://x?a=b","accessToken":"abc"}`, false},
		{`{"apiUrl":"https://x"}`, false},
		{`{"apiUrl":"https://x","accessToken":"a b"}`, false},
		{`{"apiUrl":"https://x","accessToken":"a\r\nX-Evil: 1"}`, false},
		{`null`, false},
	} {
		_, err := parseSessionRequest(bytes.NewReader([]byte(tc.body)))
		if (err == nil) != tc.ok {
			t.Errorf("session %s: err %v", tc.body, err)
		}
	}
	if r, err := parseSessionRequest(strings.NewReader(`{"apiUrl":"https://x/","accessToken":"t"}`)); err != nil || r.APIURL != "https://x" {
		t.Errorf("trailing slash: %+v %v", r, err)
	}
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"cid":"ky3"}`, true},
		{`{"cid":"abcdefghijklmnop"}`, true},
		{`{"cid":"ky"}`, false},
		{`{"cid":"abcdefghijklmnopq"}`, false},
		{`{"cid":"ky3/../x"}`, false},
		{`{"cid":"KY3"}`, false},
		{`{}`, false},
	} {
		_, err := parseConnectRequest(strings.NewReader(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("connect %s: err %v", tc.body, err)
		}
	}
}

func FuzzParseSessionRequest(f *testing.F) {
	f.Add([]byte(`{"apiUrl":"https://198.51.100.10","accessToken":"abc","expiresAt":"2030-01-01T00:00:00Z","user":"a@b"}`))
	f.Add([]byte(`{"apiUrl":"http://[::1]:8080/","accessToken":"x"} `))
	f.Add([]byte(`{"apiUrl":"https://x","accessToken":"a","expiresAt":"bad"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseSessionRequest(bytes.NewReader(b))
		if err != nil {
			return
		}
		if r.AccessToken == "" || strings.ContainsAny(r.AccessToken, " \r\n\t") || strings.HasSuffix(r.APIURL, "/") {
			t.Fatalf("accepted %+v", r)
		}
		if _, err := api.NewClient(r.APIURL, r.AccessToken, ""); err != nil {
			t.Fatalf("accepted an api URL the client refuses: %q: %v", r.APIURL, err)
		}
		if _, err := http.NewRequest("GET", r.APIURL+"/v1/me", nil); err != nil {
			t.Fatalf("accepted %q: %v", r.APIURL, err)
		}
	})
}

func FuzzParseConnectRequest(f *testing.F) {
	f.Add([]byte(`{"cid":"ky3"}`))
	f.Add([]byte(`{"cid":"ky3","x":[1,2]}`))
	f.Add([]byte(`{"cid":"\u006by3"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseConnectRequest(bytes.NewReader(b))
		if err != nil {
			return
		}
		if api.CheckCID(r.CID) != nil {
			t.Fatalf("accepted cid %q", r.CID)
		}
	})
}
