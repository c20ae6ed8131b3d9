package formlogin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/oidc"
	"github.com/runos/vpn/internal/oidctest"
	"github.com/runos/vpn/internal/testcert"
)

// idBackend also takes in the users the identity provider signs in.
type idBackend struct{ backend }

func (idBackend) SignInIdentity(_ context.Context, id oidc.Identity) (string, error) {
	return id.Email, nil
}

// setupProvider is setup with a real identity provider (internal/oidctest)
// offered on control's pages through control/oidc's relying party, and a
// client trusting both.
func setupProvider(t *testing.T) (ctrl, loopback *httptest.Server, got chan url.Values, idp *oidctest.Provider, client *http.Client) {
	t.Helper()
	var h http.Handler
	ctrl = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	ctrl.StartTLS()
	t.Cleanup(ctrl.Close)
	idpCert := testcert.New(t)
	idp = oidctest.Serve(t, idpCert, []oidctest.Client{{ID: "runos-control", Secret: "s3cret", RedirectURIs: []string{ctrl.URL + oauth.PathOIDCCallback}}},
		[]oidctest.User{{Email: "bob@example.com", Password: "bob-pw", Groups: []string{"dev"}}})
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	up, err := oidc.New(t.Context(), oidc.Config{Issuer: idp.Issuer, ClientID: "runos-control", ClientSecretFile: secret},
		ctrl.URL+oauth.PathOIDCCallback, idpCert.Client())
	if err != nil {
		t.Fatal(err)
	}
	s, err := oauth.New(oauth.Config{Issuer: ctrl.URL, Backend: idBackend{}, Store: oauth.NewMemoryStore(), Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	h = s.Handler()
	loopback, got = newLoopback(t)
	roots := x509.NewCertPool()
	roots.AddCert(ctrl.Certificate())
	roots.AppendCertsFromPEM(idpCert.CertPEM)
	client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	return ctrl, loopback, got, idp, client
}

// TestLoginWithProvider: through the provider, the scripted browser
// presses "Sign in with …" on control's page, fills the provider's form
// and ends at the loopback listener with a code.
func TestLoginWithProvider(t *testing.T) {
	ctrl, loopback, got, idp, client := setupProvider(t)
	res, err := LoginWith(t.Context(), client, authURL(ctrl, loopback), "bob@example.com", "bob-pw", Options{Provider: idp.Issuer})
	if err != nil {
		t.Fatal(err)
	}
	if q := <-got; q.Get("code") == "" || q.Get("state") != "st" {
		t.Errorf("loopback got %v", q)
	}
	if res.Body == "" {
		t.Error("no final page")
	}
	// A wrong password: the provider's page says so.
	if _, err := LoginWith(t.Context(), client, authURL(ctrl, loopback), "bob@example.com", "nope", Options{Provider: idp.Issuer}); err == nil {
		t.Error("a wrong password at the provider signed in")
	}
}

// TestLoginPasswordBesideProvider: where control's page offers the
// provider first, Login still signs in with the password form's button.
func TestLoginPasswordBesideProvider(t *testing.T) {
	ctrl, loopback, got, _, client := setupProvider(t)
	if _, err := Login(t.Context(), client, authURL(ctrl, loopback), "alice@example.com", "pw"); err != nil {
		t.Fatal(err)
	}
	if q := <-got; q.Get("code") == "" {
		t.Errorf("loopback got %v", q)
	}
}
