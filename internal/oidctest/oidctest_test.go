package oidctest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/testcert"
)

func TestDiscoveryAndLoginPage(t *testing.T) {
	cert := testcert.New(t)
	p := Serve(t, cert, []Client{{ID: "c", Secret: "s", RedirectURIs: []string{"https://rp.example.com/cb"}}},
		[]User{{Email: "ada@example.com", Password: "pw", Groups: []string{"oncall"}}})
	c := cert.Client()
	resp, err := c.Get(p.Issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var disc struct {
		Issuer   string   `json:"issuer"`
		Methods  []string `json:"code_challenge_methods_supported"`
		Grants   []string `json:"grant_types_supported"`
		Scopes   []string `json:"scopes_supported"`
		AuthURL  string   `json:"authorization_endpoint"`
		TokenURL string   `json:"token_endpoint"`
	}
	err = json.NewDecoder(resp.Body).Decode(&disc)
	resp.Body.Close()
	if err != nil || disc.Issuer != p.Issuer || !strings.Contains(strings.Join(disc.Methods, " "), "S256") ||
		!strings.Contains(strings.Join(disc.Grants, " "), "refresh_token") || !strings.Contains(strings.Join(disc.Scopes, " "), GroupsClaim) {
		t.Fatalf("discovery: %+v, %v", disc, err)
	}

	// A wrong password leaves the browser on the form, saying so.
	q := url.Values{"client_id": {"c"}, "redirect_uri": {"https://rp.example.com/cb"}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"st"}, "code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}}
	resp, err = c.Get(disc.AuthURL + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("authorize: %s at %s", resp.Status, resp.Request.URL)
	}
	resp, err = c.PostForm(p.Issuer+"/login/username", url.Values{"id": {id}, "username": {"ada@example.com"}, "password": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "username or password wrong") || resp.Request.URL.Path != "/login/username" {
		t.Errorf("wrong password: %s at %s\n%s", resp.Status, resp.Request.URL, body)
	}
}
