//go:build !windows

package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runos/vpn/auth/formlogin"
)

// BrowserLaunches is the file, in a laptop's directory, where the scripted
// browser appends one line per launch (tests count them).
const BrowserLaunches = "browser-launches.log"

// BrowserUserEnv names the lab user the scripted browser signs in as
// (an email of env.json's users); unset: the lab's operator (env.User).
const BrowserUserEnv = "RUNOS_LAB_USER"

// Browse is the lab's scripted browser (`runos-lab browser URL`, the
// laptops' $BROWSER): it opens the sign-in URL and signs in as the lab's
// user through the real login page with auth/formlogin — the form is
// fetched, filled and posted like a person would, no shortcut around it.
// A user of the identity provider (user, an email of env.json's users)
// signs in through the provider's login page. It runs inside the laptop,
// where control's address and the CLI's loopback listener are.
func Browse(ctx context.Context, env *Env, host, user, url string, out io.Writer) error {
	if host != "" {
		if f, err := os.OpenFile(filepath.Join(env.Dir, "hosts", host, BrowserLaunches),
			os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
			fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), url)
			f.Close()
		}
	}
	pem, err := os.ReadFile(env.CAFile)
	if err != nil {
		return fmt.Errorf("browser: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("browser: no certificate in %s", env.CAFile)
	}
	hc := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		Timeout:   30 * time.Second,
	}
	who := EnvUser{Email: env.User, Password: env.Password, SignIn: SignInPassword}
	if user != "" {
		u, ok := env.LabUser(user)
		if !ok {
			return fmt.Errorf("browser: %s=%s is not a user of this lab (see users in %s)", BrowserUserEnv, user, EnvFile)
		}
		who = *u
	}
	var o formlogin.Options
	fmt.Fprintf(out, "browser: opening %s\n", withoutQuery(url))
	if who.SignIn == SignInOIDC && env.OIDC != nil {
		o.Provider = env.OIDC.Issuer
		fmt.Fprintf(out, "browser: signing in as %s through the identity provider %s\n", who.Email, env.OIDC.Issuer)
	} else {
		fmt.Fprintf(out, "browser: filling the login form as %s and submitting it\n", who.Email)
	}
	res, err := formlogin.LoginWith(ctx, hc, url, who.Email, who.Password, o)
	if err != nil {
		return fmt.Errorf("browser: sign-in through the login page failed: %w", err)
	}
	fmt.Fprintf(out, "browser: signed in; redirected to %s, which says %q\n", withoutQuery(res.URL), firstLine(res.Body))
	return nil
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// withoutQuery drops a URL's query (codes and state) for display.
func withoutQuery(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i] + "?…"
	}
	return u
}
