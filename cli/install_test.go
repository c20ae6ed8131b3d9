package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

func TestInstallFlags(t *testing.T) {
	h := newHarness(t)
	h.run("vpn", "install", "--binary", "bin/runos").want(t, ExitUsage, nil, []string{`--binary "bin/runos": give an absolute path`})
	h.run("vpn", "uninstall", "--state-dir", "state").want(t, ExitUsage, nil, []string{`--state-dir "state": give an absolute path`})
	h.run("vpn", "install", "--timeout", "-1s").want(t, ExitUsage, nil, []string{"--timeout must be positive"})
	h.run("vpn", "install", "extra").want(t, ExitUsage, nil, []string{"too many arguments"})
	h.run("vpn", "uninstall", "--help").want(t, ExitOK, []string{"--purge", "device key", "sudo runos vpn uninstall"}, nil)
	r := h.run("vpn", "install", "--help")
	r.want(t, ExitOK, []string{"--operator", "--ca-file", "upgrades in place", "runos group", "--allowed-routes", "--allowed-dns-domains"}, nil)
	for _, hidden := range []string{"--service-name", "--state-dir", "--binary"} {
		if strings.Contains(r.stdout, hidden) {
			t.Errorf("help shows the test-only flag %s", hidden)
		}
	}

	// The mapping to the installer's options.
	env := map[string]string{"RUNOS_VPND_SOCKET": "/run/runos-e2e/vpnd.sock", "SUDO_USER": "alice"}
	a := newApp(Env{Getenv: func(k string) string { return env[k] }})
	dir := t.TempDir()
	t.Chdir(dir)
	o, err := a.installOptions(installFlags{operator: "bob", caFile: "ca.pem", purge: true, name: "runos-vpnd-x",
		binary: "/opt/x/runos", stateDir: "/var/lib/runos-x", iface: "wgx", logFile: "/var/log/x.log", startTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if o.Name != "runos-vpnd-x" || o.Binary != "/opt/x/runos" || o.StateDir != "/var/lib/runos-x" || o.Interface != "wgx" ||
		o.LogFile != "/var/log/x.log" || o.Operator != "bob" || !o.Purge || o.StartTimeout != 5*time.Second ||
		o.Socket != "/run/runos-e2e/vpnd.sock" || o.CAFile != filepath.Join(dir, "ca.pem") || o.Getenv("SUDO_USER") != "alice" {
		t.Errorf("options %+v", o)
	}
	// --allowed-routes and --allowed-dns-domains: checked as the daemon
	// checks them, then passed on in canonical form.
	h.run("vpn", "install", "--allowed-routes", "10.64.0.1/16").want(t, ExitUsage, nil, []string{`--allowed-routes "10.64.0.1/16": want prefixes`})
	h.run("vpn", "install", "--allowed-dns-domains", "corp").want(t, ExitUsage, nil, []string{`--allowed-dns-domains "corp": want a domain of two labels`})
	o, err = a.installOptions(installFlags{allowedRoutes: []string{" 10.64.0.0/16", "10.65.0.0/16"}, allowedDomains: []string{"corp.example."}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.Trust.AllowedRoutes, ",") + " " + strings.Join(o.Trust.AllowedDNSDomains, ","); got != "10.64.0.0/16,10.65.0.0/16 corp.example" {
		t.Errorf("trust %q", got)
	}
}

func TestDesktopCommands(t *testing.T) {
	h := newHarness(t)
	h.run("desktop").want(t, ExitOK, []string{"install", "uninstall", "menu-bar"}, nil)
	missing := filepath.Join(t.TempDir(), "runos-desktop")
	h.run("desktop", "install", "--from", missing).want(t, ExitError, nil, []string{"desktop install: --from " + missing})
	h.run("desktop", "install", "--help").want(t, ExitOK, []string{"--at-login", "make build", "--from"}, nil)
}

func TestStatusWarnsOfAnotherDaemonVersion(t *testing.T) {
	h := newHarness(t)
	r := h.run("vpn", "status")
	if strings.Contains(r.stderr, "warning: the daemon runs") {
		t.Errorf("warned about the same version:\n%s", r)
	}
	h.daemon.mu.Lock()
	h.daemon.st.Version = "v9.9.9"
	h.daemon.mu.Unlock()
	h.run("vpn", "status", "--json").want(t, ExitOK, []string{`"version": "v9.9.9"`},
		[]string{"warning: the daemon runs v9.9.9 but this runos is dev: run `sudo runos vpn install` to update the daemon"})
	// Every command that steers the daemon warns too, once.
	h.daemon.Set(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedIn, User: "alice@example.com", ExpiresAt: h.now.Add(5 * time.Hour)}
		st.Clusters = []localapi.ClusterStatus{{CID: "xym", State: localapi.ClusterConnected, Wanted: true}}
	})
	for _, args := range [][]string{{"vpn", "disconnect", "xym"}, {"vpn", "down"}, {"vpn", "connect", "ky3", "--timeout", "1s"}} {
		r := h.run(args...)
		if n := strings.Count(r.stderr, "warning: the daemon runs v9.9.9 but this runos is dev"); n != 1 {
			t.Errorf("%q warned %d times, want once:\n%s", args, n, r)
		}
	}
}
