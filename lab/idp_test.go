//go:build !windows

package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/oidctest"
)

// TestIdPServesAndAdmins: the lab's provider, as `runos-lab idp` runs it,
// answers its discovery document over TLS with the lab CA's certificate,
// and its admin socket removes a user (and refuses an unknown verb).
func TestIdPServesAndAdmins(t *testing.T) {
	dir := t.TempDir()
	pki, err := NewPKI(netip.MustParseAddr("198.51.100.10"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := pki.Leaf("idp", nil, []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := IdPConfig{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"),
		AdminSocket: filepath.Join(dir, "idp.sock")}
	for f, b := range map[string][]byte{cfg.CertFile: cert, cfg.KeyFile: key} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	aln, err := net.Listen("unix", cfg.AdminSocket)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Issuer = "https://" + ln.Addr().String()
	cfg.Users = idpUsersWithPasswords(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serveIdP(ctx, cfg, ln, aln, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveIdP: %v", err)
		}
	})

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pki.CAPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 10 * time.Second}
	resp, err := hc.Get(cfg.Issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var disc struct {
		Issuer string `json:"issuer"`
	}
	err = json.NewDecoder(resp.Body).Decode(&disc)
	resp.Body.Close()
	if err != nil || disc.Issuer != cfg.Issuer {
		t.Fatalf("discovery: issuer %q, %v", disc.Issuer, err)
	}

	env := &Env{OIDC: &EnvOIDC{AdminSocket: cfg.AdminSocket}}
	if err := IdPAdmin(t.Context(), env, "remove", cfg.Users[0].Email); err != nil {
		t.Error(err)
	}
	if err := IdPAdmin(t.Context(), env, "promote", cfg.Users[0].Email); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("an unknown verb: %v", err)
	}
	if err := IdPAdmin(t.Context(), &Env{}, "remove", "x@y.z"); err == nil {
		t.Error("a lab without a provider took a removal")
	}
}

func idpUsersWithPasswords(t *testing.T) []oidctest.User {
	topo, err := DefaultTopology(1)
	if err != nil {
		t.Fatal(err)
	}
	var us []oidctest.User
	for _, u := range topo.IdPUsers {
		us = append(us, oidctest.User{Email: u.Email, Password: "pw", Groups: u.Groups})
	}
	return us
}

// TestIdPEnv: env.json lists the operator first (password), then the
// provider's users in groups oncall and dev, and the provider's issuer;
// the secrets give each a password of their own.
func TestIdPEnv(t *testing.T) {
	topo, err := DefaultTopology(1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := RandomSecrets(topo)
	if err != nil {
		t.Fatal(err)
	}
	l := &Lab{dir: "/lab", topo: topo, secrets: s}
	e := &Env{}
	l.idpEnv(e)
	if len(e.Users) != 3 || e.Users[0].Email != topo.User || e.Users[0].SignIn != SignInPassword || e.Users[0].Password != s.Password {
		t.Fatalf("users %+v", e.Users)
	}
	for i, g := range []string{GroupOncall, GroupDev} {
		u := e.Users[i+1]
		if u.SignIn != SignInOIDC || len(u.Groups) != 1 || u.Groups[0] != g || u.Password == "" || u.Password == s.Password {
			t.Errorf("user %d: %+v", i+1, u)
		}
	}
	if e.OIDC == nil || e.OIDC.Issuer != "https://198.51.100.7" || e.OIDC.ClientID != IdPClientID {
		t.Errorf("oidc %+v", e.OIDC)
	}
	if u, ok := e.LabUser("DEV@rjwrn.example.com"); !ok || u.Groups[0] != GroupDev {
		t.Errorf("LabUser: %+v %v", u, ok)
	}
	argv := strings.Join(l.controlProcs()[0].Argv, " ")
	if !strings.Contains(argv, "--oidc-issuer https://198.51.100.7 --oidc-client-id runos-control") || strings.Contains(argv, s.IdPClientSecret) {
		t.Errorf("control's command line: %s", argv)
	}
}
