package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runArgs(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "shared")
	if err := os.WriteFile(shared, []byte("secret\n"), 0o600); err != nil || os.Chmod(shared, 0o644) != nil {
		t.Fatal(err)
	}
	base := []string{"--control", "https://192.0.2.1", "--node-id", "n1", "--token-file", tok, "--state-dir", filepath.Join(dir, "state")}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "missing --control, --node-id, --token-file, --state-dir"},
		{[]string{"--node-id", "n1"}, exitUsage, "missing --control, --token-file, --state-dir"},
		{append(base, "--heartbeat", "30s"), exitUsage, "--heartbeat 30s: want more than 0 and less than 30s"},
		{append(base, "--heartbeat", "0s"), exitUsage, "--heartbeat 0s"},
		{append(base, "--log-level", "loud"), exitUsage, `--log-level "loud"`},
		{append(base, "--log-format", "xml"), exitUsage, `--log-format "xml"`},
		{append(base, "--interface", "much-too-long-name"), exitUsage, "1 to 15 characters"},
		{append(base, "--interface", "wg/1"), exitUsage, "no spaces, slashes or colons"},
		{append(base, "--service-range", "10.96.0.0/12", "--cluster-dns", "192.168.0.10"), exitUsage, "cluster dns 192.168.0.10 is in none of the declared prefixes"},
		{append(base, "--pod-range", "100.96.0.0/16"), exitUsage, "overlaps the VPN's pool"},
		{append(base, "extra"), exitUsage, `unexpected argument "extra"`},
		{append(base, "--no-such-flag"), exitUsage, "unknown flag: --no-such-flag"},
		{[]string{"--control", "ftp://x", "--node-id", "n1", "--token-file", tok, "--state-dir", dir}, exitUsage, "--control"},
		{[]string{"--control", "https://192.0.2.1", "--node-id", "n1", "--token-file", empty, "--state-dir", dir}, exitError, "enrollment token alone on one line"},
		{[]string{"--control", "https://192.0.2.1", "--node-id", "n1", "--token-file", filepath.Join(dir, "nope"), "--state-dir", dir}, exitError, "--token-file"},
		{append(base, "--ca-file", filepath.Join(dir, "no-ca.pem")), exitUsage, "read CA file"},
		// The enrollment token never travels in clear text, nor sits in a
		// file other users may read.
		{[]string{"--control", "http://192.0.2.1", "--node-id", "n1", "--token-file", tok, "--state-dir", dir}, exitUsage, "--control: control URL \"http://192.0.2.1\": plain http:// sends the tokens in clear text"},
		{[]string{"--control", "https://192.0.2.1", "--node-id", "n1", "--token-file", shared, "--state-dir", dir}, exitError, "readable by other users (mode -rw-r--r--), and it holds secrets: refused; chmod 600 " + shared},
	} {
		code, _, stderr := runArgs(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	// A refused start leaves no state behind.
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Error("a refused start created the state directory")
	}
}

func TestCAFileFromEnvironment(t *testing.T) {
	f := flags{control: "https://x", nodeID: "n1", tokenFile: "t", stateDir: "d", iface: "wgvpn", heartbeat: 10e9, logLevel: "info", logFormat: "text"}
	ca, err := f.check(envMap{"RUNOS_CA_FILE": "/etc/runos/ca.pem"}.get)
	if err != nil || ca != "/etc/runos/ca.pem" {
		t.Fatalf("ca %q err %v", ca, err)
	}
	f.caFile = "/flag.pem"
	if ca, _ := f.check(envMap{"RUNOS_CA_FILE": "/env.pem"}.get); ca != "/flag.pem" {
		t.Fatalf("--ca-file must win over the environment, got %q", ca)
	}
}

func TestHelpExplains(t *testing.T) {
	code, out, _ := runArgs(t, nil, "--help")
	if code != exitOK {
		t.Fatalf("--help exit %d", code)
	}
	for _, want := range []string{"--token-file", "--state-dir", "gateway.key", "RUNOS_CA_FILE", "32768", "SIGTERM", "--heartbeat"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

type envMap map[string]string

func (m envMap) get(k string) string { return m[k] }
