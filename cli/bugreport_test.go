package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/cli/reportfile"
	"github.com/runos/vpn/installer"
)

// TestBugreportHoldsEachFileRedacted: the archive opens, holds every named
// file, and a token and a private key that the machine's facts leak (a
// resolver comment, a service file) are not in any byte of it.
func TestBugreportHoldsEachFileRedacted(t *testing.T) {
	sys, fd := healthy()
	priv, _ := wgtypes.GeneratePrivateKey()
	fd.st.Tunnel.PublicKey = priv.PublicKey().String()
	token := "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5"
	fx := facts{
		OS:  func() string { return "linux/amd64\n" },
		DNS: func() string { return "nameserver 127.0.80.53 # token=" + token + "\n" },
		WG:  func(string) string { return "interface: wg1\n  private key: " + priv.String() + "\n" },
		Service: func() (*installer.ServiceStatus, error) {
			return &installer.ServiceStatus{Service: "runos-vpnd", Installed: true, Definition: "/etc/init.d/runos-vpnd",
				Text: "#!/bin/sh\nexec runos vpnd --access-token " + token + "\n"}, nil
		},
	}
	var out bytes.Buffer
	sock := filepath.Join(t.TempDir(), "none.sock")
	a := newApp(Env{Stdout: &out, Stderr: &out, Now: func() time.Time { return doctorNow },
		Getenv: func(k string) string { return map[string]string{"RUNOS_VPND_SOCKET": sock}[k] }})
	files := a.bugreport(context.Background(), sys, fx)
	path := filepath.Join(t.TempDir(), "r.tar.gz")
	if _, err := reportfile.Write(path, bugreportFiles, files, doctorNow); err != nil {
		t.Fatal(err)
	}
	got, raw, err := reportfile.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range bugreportFiles {
		if len(got[name]) == 0 {
			t.Errorf("%s missing or empty", name)
		}
	}
	for _, secret := range []string{token, priv.String()} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("%.12s… is in the report", secret)
		}
	}
	if !strings.Contains(string(got["status.json"]), priv.PublicKey().String()) {
		t.Error("the device's public key was redacted from status.json")
	}
	if !strings.Contains(string(got["doctor.json"]), `"id": "ky3.udp"`) || !strings.Contains(string(got["daemon.log"]), "not included") {
		t.Errorf("doctor.json:\n%s\ndaemon.log:\n%s", got["doctor.json"], got["daemon.log"])
	}
}
