//go:build !windows

package lab

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/internal/oidctest"
)

// The lab's identity provider: host idp runs `runos-lab idp`, a real
// OpenID Connect provider (internal/oidctest: zitadel/oidc's pkg/op) over
// HTTPS with a certificate from the lab's CA, whose users are in two
// groups. Control signs users in through it (--oidc-issuer …) while the
// world file's password user, the operator, keeps working. An admin
// socket in the lab directory removes or disables a user at the provider
// while the lab runs, as a team's administrator would.

// KindIdP is the identity provider's host.
const KindIdP = "idp"

// IdPHost is the identity provider's host name.
const IdPHost = "idp"

// IdPClientID is control's client ID at the lab's provider.
const IdPClientID = "runos-control"

// The groups of the provider's users, as its groups claim names them.
// Control knows a group once it is created (runos groups create); what a
// group may reach is the account's policy (runos policy set).
const (
	GroupOncall = "oncall" // meant to reach every cluster
	GroupDev    = "dev"    // meant to connect to ky3 only
)

// IdPUser is a user of the lab's provider (the password is a lab secret).
type IdPUser struct {
	Email  string
	Groups []string
}

// idpUsers are the provider's users: one per group.
func idpUsers(aid, root string) []IdPUser {
	return []IdPUser{
		{Email: "oncall@" + aid + "." + root, Groups: []string{GroupOncall}},
		{Email: "dev@" + aid + "." + root, Groups: []string{GroupDev}},
	}
}

// IdPConfig is what `runos-lab idp` serves, from a file the lab writes
// (it holds the users' passwords and the client's secret: not argv).
type IdPConfig struct {
	Issuer      string            `json:"issuer"`
	Listen      string            `json:"listen"`
	CertFile    string            `json:"certFile"`
	KeyFile     string            `json:"keyFile"`
	AdminSocket string            `json:"adminSocket"`
	Clients     []oidctest.Client `json:"clients"`
	Users       []oidctest.User   `json:"users"`
}

// Paths of the identity provider's files.
func (l *Lab) idpConfigFile() string  { return filepath.Join(l.hostDir(IdPHost), "idp.json") }
func (l *Lab) idpCertFile() string    { return filepath.Join(l.hostDir(IdPHost), "cert.pem") }
func (l *Lab) idpKeyFile() string     { return filepath.Join(l.hostDir(IdPHost), "key.pem") }
func (l *Lab) idpAdminSocket() string { return filepath.Join(l.hostDir(IdPHost), "run", "idp.sock") }
func (l *Lab) idpSecretFile() string  { return filepath.Join(l.controlDir(), "oidc-client-secret") }
func (l *Lab) idpIssuer() string      { return "https://" + l.topo.IdPIP.String() }
func (l *Lab) idpListen() string      { return net.JoinHostPort(l.topo.IdPIP.String(), "443") }
func (l *Lab) hasIdP() bool           { return l.topo.IdPIP.IsValid() }
func (l *Lab) idpProcArgv() []string {
	return []string{filepath.Join(l.bin, "runos-lab"), "idp", "--config", l.idpConfigFile()}
}
func (l *Lab) idpProc() Proc           { return Proc{Host: IdPHost, Name: "idp", Argv: l.idpProcArgv()} }
func (l *Lab) idpControlEnv() []string { return []string{"SSL_CERT_FILE=" + l.caFile()} }

// idpControlFlags are control's flags for the lab's provider: its users
// are created in the lab's account at their first sign-in.
func (l *Lab) idpControlFlags() []string {
	return []string{"--oidc-issuer", l.idpIssuer(), "--oidc-client-id", IdPClientID,
		"--oidc-client-secret-file", l.idpSecretFile(), "--oidc-account", l.topo.AID}
}

// writeIdPFiles writes the provider's certificate (the lab CA's, for its
// address), its configuration, and control's copy of the client secret.
func (l *Lab) writeIdPFiles(pki *PKI) error {
	if !l.hasIdP() {
		return nil
	}
	cert, key, err := pki.Leaf("identity provider (lab)", nil, []netip.Addr{l.topo.IdPIP})
	if err != nil {
		return fmt.Errorf("identity provider certificate: %w", err)
	}
	cfg := IdPConfig{Issuer: l.idpIssuer(), Listen: l.idpListen(), CertFile: l.idpCertFile(), KeyFile: l.idpKeyFile(),
		AdminSocket: l.idpAdminSocket(),
		Clients: []oidctest.Client{{ID: IdPClientID, Secret: l.secrets.IdPClientSecret,
			RedirectURIs: []string{l.apiURL() + oauth.PathOIDCCallback}}}}
	for _, u := range l.topo.IdPUsers {
		cfg.Users = append(cfg.Users, oidctest.User{Email: u.Email, Password: l.secrets.IdPPasswords[u.Email], Groups: u.Groups})
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		b    []byte
		mode os.FileMode
	}{
		{l.idpCertFile(), cert, 0o644}, {l.idpKeyFile(), key, 0o600}, {l.idpConfigFile(), b, 0o600},
		{l.idpSecretFile(), []byte(l.secrets.IdPClientSecret + "\n"), 0o600},
	} {
		if err := os.WriteFile(f.path, f.b, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// idpReady: the provider's discovery document answers over TLS from
// control's host, naming the lab's issuer.
func (l *Lab) idpReady(ctx context.Context) error {
	body, err := l.Get(ctx, "control", l.idpIssuer()+"/.well-known/openid-configuration")
	if err != nil {
		return err
	}
	if !strings.Contains(body, `"issuer":"`+l.idpIssuer()+`"`) {
		return fmt.Errorf("the provider's discovery document names another issuer: %.200s", body)
	}
	return nil
}

// idpEnv is env.json's view of the provider and its users.
func (l *Lab) idpEnv(e *Env) {
	e.Users = append(e.Users, EnvUser{Email: l.topo.User, Password: l.secrets.Password, Groups: []string{}, SignIn: SignInPassword})
	if !l.hasIdP() {
		return
	}
	for _, u := range l.topo.IdPUsers {
		e.Users = append(e.Users, EnvUser{Email: u.Email, Password: l.secrets.IdPPasswords[u.Email], Groups: u.Groups, SignIn: SignInOIDC})
	}
	e.OIDC = &EnvOIDC{Issuer: l.idpIssuer(), ClientID: IdPClientID, Host: IdPHost, CertFile: l.idpCertFile(), AdminSocket: l.idpAdminSocket()}
}

// ServeIdP runs the lab's provider from its configuration until ctx ends.
func ServeIdP(ctx context.Context, cfg IdPConfig, log *slog.Logger) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	_ = os.Remove(cfg.AdminSocket)
	aln, err := net.Listen("unix", cfg.AdminSocket)
	if err != nil {
		ln.Close()
		return fmt.Errorf("identity provider admin socket: %w", err)
	}
	return serveIdP(ctx, cfg, ln, aln, log)
}

// serveIdP serves the provider on ln (HTTPS) and its admin API on aln.
func serveIdP(ctx context.Context, cfg IdPConfig, ln, aln net.Listener, log *slog.Logger) error {
	defer ln.Close()
	defer aln.Close()
	pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("identity provider certificate: %w", err)
	}
	p, err := oidctest.New(cfg.Issuer, cfg.Clients, cfg.Users, log)
	if err != nil {
		return err
	}
	tln := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	srv := &http.Server{Handler: p.Handler, ReadHeaderTimeout: 10 * time.Second}
	admin := &http.Server{Handler: p.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(tln) }()
	go func() { errc <- admin.Serve(aln) }()
	log.Info("identity provider serving", "issuer", cfg.Issuer, "listen", ln.Addr(), "users", len(cfg.Users))
	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
	}
	srv.Close()
	admin.Close()
	return err
}

// IdPAdmin changes a user at the running lab's provider: remove, disable
// or enable (the admin socket of env.json's oidc).
func IdPAdmin(ctx context.Context, e *Env, verb, email string) error {
	if e.OIDC == nil || e.OIDC.AdminSocket == "" {
		return errors.New("this lab runs no identity provider")
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.OIDC.AdminSocket)
	}}, Timeout: 10 * time.Second}
	return oidctest.AdminDo(ctx, hc, "http://idp", verb, email)
}
