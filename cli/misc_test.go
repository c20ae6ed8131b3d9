package cli

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/state"
)

func TestConfigCommands(t *testing.T) {
	h := newHarness(t)
	path := h.env["RUNOS_CONFIG"]
	h.run("config", "set", "cid", "ky3").want(t, 0, nil, nil)
	h.run("config", "set", "api-url", "https://198.51.100.10").want(t, 0, nil, []string{"note: $RUNOS_API_URL is set and overrides api-url"})
	h.run("config", "get", "cid").want(t, 0, []string{"ky3\n"}, nil)
	before, _ := os.ReadFile(path)

	// Refusals change nothing.
	h.run("config", "set", "cid", "Bad_CID").want(t, 2, nil, []string{"a cid is 3 to 16 lowercase letters and digits"})
	h.run("config", "set", "api-url", "ftp://x").want(t, 2, nil, []string{"want https://host"})
	h.run("config", "set", "colour", "blue").want(t, 2, nil, []string{`unknown config key "colour" (known keys: cid, api-url, ca-file, mtu)`})
	h.run("config", "get", "colour").want(t, 2, nil, []string{"unknown config key"})
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused set changed the file:\n%s\nwas\n%s", after, before)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode: %v %v", fi.Mode(), err)
	}

	// The environment overrides the file, and list says so.
	r := h.run("config", "list", "--json")
	var ss []setting
	if err := json.Unmarshal([]byte(r.stdout), &ss); err != nil || len(ss) != 4 {
		t.Fatalf("config list --json: %v %s", err, r.stdout)
	}
	if ss[0] != (setting{"cid", "ky3", "config"}) || ss[1].Value != h.control.URL() || ss[1].Source != "env RUNOS_API_URL" {
		t.Errorf("settings %+v", ss)
	}
	delete(h.env, "RUNOS_API_URL")
	delete(h.env, "RUNOS_CA_FILE")
	h.run("config", "get", "api-url").want(t, 0, []string{"https://198.51.100.10\n"}, nil)
	h.run("config", "list").want(t, 0, []string{"KEY      VALUE                  SOURCE", "api-url  https://198.51.100.10  config", "ca-file  -                      -"}, nil)
	h.run("config", "unset", "cid").want(t, 0, nil, nil)
	h.run("config", "get", "cid").want(t, 0, nil, nil)

	// A broken file is reported with its path and changes nothing.
	if err := os.WriteFile(path, []byte(`{"cid": 42}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.run("config", "set", "cid", "ky3").want(t, 1, nil, []string{"config file " + path, `key "cid": want a string`, "fix or remove it"})
	if b, _ := os.ReadFile(path); string(b) != `{"cid": 42}` {
		t.Errorf("broken file rewritten: %s", b)
	}
}

func TestVPNDFlags(t *testing.T) {
	h := newHarness(t)
	h.run("vpnd", "--state-dir", "/tmp/sd", "--socket", "/tmp/s.sock", "--ca-file", "/tmp/ca.pem", "--interface", "wg7", "--log-level", "debug").want(t, 0, nil, nil)
	h.run("vpnd", "--cleanup", "--state-dir", "/tmp/sd").want(t, 0, nil, nil)
	h.run("vpnd").want(t, 0, nil, nil)
	if len(h.vpnd.runs) != 2 || len(h.vpnd.cleanups) != 1 {
		t.Fatalf("runs %d cleanups %d", len(h.vpnd.runs), len(h.vpnd.cleanups))
	}
	c := h.vpnd.runs[0]
	if c.StateDir != "/tmp/sd" || c.Socket != "/tmp/s.sock" || c.CAFile != "/tmp/ca.pem" || c.Interface != "wg7" || c.Logger == nil || c.DNS == nil || c.Cleanup == nil {
		t.Errorf("config %+v", c)
	}
	if c := h.vpnd.runs[1]; c.StateDir != "/var/lib/runos" || c.Socket != h.daemon.socket || c.CAFile != h.control.caFile || c.Interface != "wg1" {
		t.Errorf("defaults %+v (socket from RUNOS_VPND_SOCKET, CA from RUNOS_CA_FILE)", c)
	}
	if h.vpnd.cleanups[0].StateDir != "/tmp/sd" {
		t.Errorf("cleanup %+v", h.vpnd.cleanups[0])
	}
	if c := h.vpnd.runs[1]; c.AllowHTTP || !slices.Equal(state.Prefixes(c.Trust.Routes), []string{"100.96.0.0/16", "100.100.0.0/16"}) || len(c.Trust.Domains) != 0 {
		t.Errorf("trust by default: %+v, plain HTTP %v", c.Trust, c.AllowHTTP)
	}
	if c := h.vpnd.runs[1]; c.MTU != 0 || c.NetMon == nil {
		t.Errorf("defaults: mtu %d (want 0: the tunnel's 1420), network monitor set %v", c.MTU, c.NetMon != nil)
	}

	// RUNOS_VPND_STATE_DIR is --state-dir's default, for the daemon and its
	// clean-up alike (the lab sets it).
	h.env["RUNOS_VPND_STATE_DIR"] = "/tmp/lab/hosts/client/state"
	h.run("vpnd", "--cleanup").want(t, 0, nil, nil)
	h.run("vpnd", "--insecure-http", "--allowed-routes", "100.96.0.0/16,10.200.0.0/16", "--allowed-dns-domains", "example.org").want(t, 0, nil, nil)
	if c := h.vpnd.cleanups[1]; c.StateDir != "/tmp/lab/hosts/client/state" {
		t.Errorf("cleanup with RUNOS_VPND_STATE_DIR: %+v", c)
	}
	c = h.vpnd.runs[2]
	if c.StateDir != "/tmp/lab/hosts/client/state" || !c.AllowHTTP ||
		!slices.Equal(state.Prefixes(c.Trust.Routes), []string{"100.96.0.0/16", "10.200.0.0/16"}) || !slices.Equal(c.Trust.Domains, []string{"example.org"}) {
		t.Errorf("flags: %+v", c)
	}
	h.run("vpnd", "--allowed-routes", "0.0.0.0/1x").want(t, ExitUsage, nil, []string{`--allowed-routes "0.0.0.0/1x"`})
	h.run("vpnd", "--allowed-dns-domains", "com").want(t, ExitUsage, nil, []string{`--allowed-dns-domains "com": want a domain of two labels`})

	// No config to be found (a service with no home): the default MTU,
	// not a daemon that will not start.
	home, xdg, cfg := h.env["HOME"], h.env["XDG_CONFIG_HOME"], h.env["RUNOS_CONFIG"]
	delete(h.env, "HOME")
	delete(h.env, "XDG_CONFIG_HOME")
	delete(h.env, "RUNOS_CONFIG")
	h.run("vpnd").want(t, 0, nil, []string{"the mtu config key was not read"})
	h.env["HOME"], h.env["XDG_CONFIG_HOME"], h.env["RUNOS_CONFIG"] = home, xdg, cfg
	if c := h.vpnd.runs[len(h.vpnd.runs)-1]; c.MTU != 0 {
		t.Errorf("mtu %d without a config", c.MTU)
	}

	// --mtu, else the mtu key of the config.
	h.run("vpnd", "--mtu", "1380").want(t, 0, nil, nil)
	h.run("vpnd", "--mtu", "900").want(t, 2, nil, []string{"--mtu: invalid mtu 900: want 1280 to 9000"})
	h.run("config", "set", "mtu", "1300").want(t, 0, nil, nil)
	h.run("vpnd").want(t, 0, nil, nil)
	if n := len(h.vpnd.runs); n != 6 || h.vpnd.runs[4].MTU != 1380 || h.vpnd.runs[5].MTU != 1300 {
		t.Errorf("mtu from the flag and the config: %d runs", n)
	}
}

func TestVersion(t *testing.T) {
	h := newHarness(t)
	h.run("version").want(t, 0, []string{"runos  dev (commit unknown, built unknown)", "daemon dev (commit unknown, built unknown)"}, nil)
	h.daemon.version = localapi.Version{Version: "v0.1.0", Commit: "abc", Date: "2026-12-01"}
	r := h.run("version", "--json")
	r.want(t, 0, []string{`"mismatch": true`, `"version": "v0.1.0"`}, []string{"warning: the daemon runs v0.1.0 but this command is dev: run `sudo runos vpn install`"})
	h.env["RUNOS_VPND_SOCKET"] = filepath.Join(h.dir, "nope.sock")
	h.run("version").want(t, 0, []string{"daemon not reachable: the RunOS VPN daemon is not running"}, nil)
}

func TestLoginNeedsAPIURL(t *testing.T) {
	h := newHarness(t)
	delete(h.env, "RUNOS_API_URL")
	h.run("login").want(t, 1, nil, []string{"login: no control URL configured"})
	h.env["RUNOS_API_URL"] = "nope"
	h.run("login").want(t, 1, nil, []string{"RUNOS_API_URL: invalid api-url"})
}

func TestProgressOnATerminal(t *testing.T) {
	var b strings.Builder
	a := newApp(Env{Stderr: &b, IsTerminal: func(io.Writer) bool { return true }})
	p := a.startProgress("waiting")
	p.Write([]byte("open https://x\n"))
	p.Set("still waiting")
	p.Stop("done")
	out := b.String()
	for _, want := range []string{"⠋ waiting", "\r\033[Kopen https://x\n", "still waiting", "\r\033[Kdone\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal progress lacks %q: %q", want, out)
		}
	}
}

func TestProgressPlainLines(t *testing.T) {
	var b strings.Builder
	a := newApp(Env{Stderr: &b, IsTerminal: func(io.Writer) bool { return false }})
	p := a.startProgress("waiting")
	p.Set("waiting")
	p.Set("ky3: connecting")
	p.Write([]byte("open https://x\n"))
	p.Stop("")
	if got, want := b.String(), "waiting\nky3: connecting\nopen https://x\n"; got != want {
		t.Errorf("plain progress %q, want %q", got, want)
	}
}

func TestVPNDLogFile(t *testing.T) {
	h := newHarness(t)
	path := filepath.Join(t.TempDir(), "vpnd.log")
	h.run("vpnd", "--log-file", path).want(t, 0, nil, nil)
	h.vpnd.runs[0].Logger.Info("hello from the daemon")
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "hello from the daemon") {
		t.Fatalf("log file: %q, %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("log file mode %v, want 0600", fi.Mode().Perm())
	}
	h.run("vpnd", "--log-file", filepath.Join(t.TempDir(), "no", "such", "dir", "x.log")).want(t, 1, nil, []string{"--log-file"})
}

// A control URL that is not https is refused before a token goes anywhere,
// unless this runos was started with --insecure-http.
func TestPlainHTTPControlRefused(t *testing.T) {
	h := newHarness(t)
	h.env["RUNOS_API_URL"] = "http://127.0.0.1:1"
	h.env["RUNOS_TOKEN"] = "operator-token"
	h.run("clusters", "list").want(t, 1, nil, []string{"plain http:// sends the tokens in clear text", "--insecure-http", "api-url from env RUNOS_API_URL"})
	h.run("vpn", "up", "--cid", "ky3").want(t, 1, nil, []string{"plain http:// sends the tokens in clear text"})
	if len(h.signIns) != 0 {
		t.Errorf("signed in to a plain-HTTP control %d times", len(h.signIns))
	}
	// With the flag the request is made (and fails: nothing listens there).
	r := h.run("--insecure-http", "clusters", "list")
	if r.code != 1 || strings.Contains(r.stderr, "clear text") || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("with --insecure-http: %s", r)
	}
}
