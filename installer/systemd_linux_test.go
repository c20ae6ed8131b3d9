package installer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/netnstest"
)

// TestSystemdUnitVerifies has systemd itself read the unit: no unknown
// key, no bad value.
func TestSystemdUnitVerifies(t *testing.T) {
	netnstest.Require(t, "systemd-analyze")
	dir := t.TempDir()
	bin := filepath.Join(dir, "runos")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := linuxSpec()
	s.Binary = bin
	unit := filepath.Join(dir, "runos-vpnd-verify.service")
	if err := os.WriteFile(unit, []byte(systemdUnit(s)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
	// Complaints about the machine (no systemd running, other units) are
	// not the unit's; those about our file name it.
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, filepath.Base(unit)) {
			t.Errorf("systemd-analyze: %s", l)
		}
	}
	if err != nil && strings.Contains(string(out), filepath.Base(unit)) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
