package cli

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// TestRedactorRemovesSecretsInEveryForm: a private key and a token, raw,
// base64 and hex, inside JSON, logs and headers, never survive; public
// keys named on purpose and ordinary text do.
func TestRedactorRemovesSecretsInEveryForm(t *testing.T) {
	priv, _ := wgtypes.GeneratePrivateKey()
	pub := priv.PublicKey().String()
	tb := make([]byte, 32)
	_, _ = rand.Read(tb)
	tok := base64.RawURLEncoding.EncodeToString(tb)
	forms := func(s string) []string {
		return []string{s, base64.StdEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s)), hex.EncodeToString([]byte(s))}
	}
	var secrets []string
	secrets = append(secrets, forms(priv.String())...)
	secrets = append(secrets, forms(tok)...)
	secrets = append(secrets, hex.EncodeToString(priv[:]))
	var in strings.Builder
	for _, s := range secrets {
		in.WriteString(`{"accessToken":"` + s + `","publicKey":"` + pub + `"}` + "\n")
		in.WriteString("level=INFO msg=x key=" + s + " other\n")
		in.WriteString("Authorization: Bearer " + s + "\n")
		in.WriteString("private_key=" + s + "\n")
		in.WriteString("[" + s + "]\n")
	}
	in.WriteString("password: hunter2\nCookie: runos_csrf=abc123; other=1\n")
	in.WriteString("route 100.100.1.0/24 dev wg1 /var/lib/runos/dns-changes.json listening on 127.0.80.53:53\n")
	out := newRedactor(pub).redact(in.String())
	for _, s := range append(secrets, "hunter2", "abc123") {
		if strings.Contains(out, s) {
			t.Errorf("%.20s… survived redaction", s)
		}
	}
	if !strings.Contains(out, pub) {
		t.Error("the public key named on purpose was redacted")
	}
	if !strings.Contains(out, "route 100.100.1.0/24 dev wg1 /var/lib/runos/dns-changes.json listening on 127.0.80.53:53") {
		t.Errorf("ordinary text changed:\n%s", out)
	}
}
