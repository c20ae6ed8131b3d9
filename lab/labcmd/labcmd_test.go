//go:build !windows

package labcmd

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExecUsage(t *testing.T) {
	for _, args := range [][]string{
		{"exec", "client"},
		{"exec", "client", "wg"},
		{"exec", "--", "wg"},
	} {
		code, _, errs := run(args...)
		if code == 0 || !strings.Contains(errs, "usage: runos-lab exec") {
			t.Errorf("%v: code %d, stderr %q", args, code, errs)
		}
	}
}

func TestNoLab(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	for _, args := range [][]string{
		{"exec", "--dir", dir, "client", "--", "true"},
		{"status", "--dir", dir},
	} {
		code, _, errs := run(args...)
		if code != 1 || !strings.Contains(errs, "runos-lab up --dir") {
			t.Errorf("%v: code %d, stderr %q (want a hint to run up)", args, code, errs)
		}
	}
}

func TestHelpNamesTheHosts(t *testing.T) {
	code, out, _ := run("exec", "--help")
	if code != 0 || !strings.Contains(out, "ky3-n1") || !strings.Contains(out, "BROWSER") {
		t.Errorf("exec --help: %d\n%s", code, out)
	}
	code, out, _ = run("--help")
	if code != 0 || strings.Contains(out, "webapp") || strings.Contains(out, "browser URL") {
		t.Errorf("--help lists the hidden helpers:\n%s", out)
	}
}

func TestUpRejectsBadClients(t *testing.T) {
	code, _, errs := run("up", "--dir", filepath.Join(t.TempDir(), "l"), "--clients", "0", "--bin", t.TempDir())
	if code == 0 || !strings.Contains(errs, "--clients 0") {
		t.Errorf("--clients 0 accepted: %d %q", code, errs)
	}
}
