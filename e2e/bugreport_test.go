//go:build !windows

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/cli/reportfile"
)

// TestBugreportRedacted: a bug report built on a live, connected laptop
// opens, holds every named file, and not one byte of it (the tar stream,
// headers and all) holds the device's private key or the session's token,
// raw, in base64 or in hex.
func TestBugreportRedacted(t *testing.T) {
	w := newWorld(t, 1, 0)
	h := w.env.Client.Host
	w.must(h, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.waitStatus(h, 30*time.Second, "connected to ky3", upOn("n1", "ky3"))
	// Something in the log worth reading, and the DNS forwarder used.
	w.must(h, nil, "getent", "hosts", "ky3."+strings.SplitN(w.env.Clusters[0].Domain, ".", 2)[1])

	out := filepath.Join(w.env.Dir, "hosts", h, "home", "report.tar.gz")
	printed := w.must(h, nil, "runos", "vpn", "bugreport", "-o", out)
	if !strings.Contains(printed, out) || !strings.Contains(printed, "KiB") {
		t.Errorf("bugreport printed %q; want the path and the size", printed)
	}
	files, raw, err := reportfile.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"README.txt", "versions.txt", "os.txt", "status.json", "doctor.json", "daemon.log",
		"routes.txt", "addresses.txt", "dns.txt", "wg.txt", "service.txt"} {
		if len(files[name]) == 0 {
			t.Errorf("%s missing or empty", name)
		}
	}
	for name, want := range map[string]string{
		"daemon.log":  "runos vpnd serving",
		"status.json": `"metrics"`,
		"doctor.json": `"id": "ky3.udp"`,
		"wg.txt":      "private key: (hidden)",
		"routes.txt":  "100.100.1.0/24",
		"dns.txt":     "mode resolv.conf",
	} {
		if !strings.Contains(string(files[name]), want) {
			t.Errorf("%s lacks %q:\n%s", name, want, files[name])
		}
	}

	// The secrets, from the daemon's state directory.
	state := filepath.Join(w.env.Dir, "hosts", h, "state")
	kb, err := os.ReadFile(filepath.Join(state, "device.key"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := wgtypes.ParseKey(strings.TrimSpace(string(kb)))
	if err != nil {
		t.Fatal(err)
	}
	var prefs struct {
		AccessToken string `json:"accessToken"`
	}
	pb, err := os.ReadFile(filepath.Join(state, "prefs.json"))
	if err != nil || json.Unmarshal(pb, &prefs) != nil || prefs.AccessToken == "" {
		t.Fatalf("prefs.json: %v\n%s", err, pb)
	}
	if !strings.Contains(string(files["status.json"]), key.PublicKey().String()) {
		t.Error("the device's public key is not in status.json (public keys stay)")
	}
	forms := map[string][]byte{
		"key raw":            key[:],
		"key base64":         []byte(key.String()),
		"key base64url":      []byte(base64.RawURLEncoding.EncodeToString(key[:])),
		"key hex":            []byte(hex.EncodeToString(key[:])),
		"token raw":          []byte(prefs.AccessToken),
		"token base64":       []byte(base64.StdEncoding.EncodeToString([]byte(prefs.AccessToken))),
		"token base64 (raw)": []byte(base64.RawStdEncoding.EncodeToString([]byte(prefs.AccessToken))),
		"token hex":          []byte(hex.EncodeToString([]byte(prefs.AccessToken))),
	}
	if tb, err := base64.RawURLEncoding.DecodeString(prefs.AccessToken); err == nil {
		forms["token bytes"] = tb
		forms["token bytes hex"] = []byte(hex.EncodeToString(tb))
		forms["token bytes base64"] = []byte(base64.StdEncoding.EncodeToString(tb))
	}
	for name, form := range forms {
		for _, v := range [][]byte{form, bytes.ToUpper(form)} {
			if bytes.Contains(raw, v) {
				t.Errorf("the report holds the %s", name)
			}
		}
	}
}
