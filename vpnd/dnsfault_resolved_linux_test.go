package vpnd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/fault"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/resolvedtest"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestDaemonDNSFaultsResolved is TestDaemonDNSFaults where systemd-resolved
// manages DNS: the real daemon (runos built with runosfault) stops dead
// after recording the link change, after SetLinkDNS and after
// SetLinkDomains; `runos vpnd --cleanup` must leave no cluster server on any
// link and public names resolving, and a restart must give the tunnel's
// link the cluster's server and domain again.
func TestDaemonDNSFaultsResolved(t *testing.T) {
	netnstest.Require(t, append([]string{"getent", "go"}, resolvedtest.Commands...)...)
	bin := faultBuild(t)
	l := newLab(t)
	l.bin, l.real = bin, true
	const ky3Private, ky3Public, www = "100.100.1.1", "198.51.100.21", "192.0.2.80"
	dnsServer(t, l.ctl, "10.0.0.2:53", map[string]string{"www.example.test": www, "ky3.rjwrn.example.com": ky3Public})
	dnsServer(t, l.servers["ky3/n1"].NS, ky3Private+":53", map[string]string{"ky3.rjwrn.example.com": ky3Private})
	resolvedtest.BindMountedResolvConf(t, l.laptop, resolvedtest.StubResolvConf)
	bus := resolvedtest.PrivateSystemBus(t)
	res := resolvedtest.Start(t, l.laptop, bus)
	res.SetLink(t, "eth0", []string{"10.0.0.2"}, []string{"~."})
	lookup := func(name string) string {
		out, err := l.laptop.Exec("getent", "ahostsv4", name)
		if err != nil {
			return "(not found)"
		}
		return strings.Fields(out)[0]
	}
	waitLookup := func(when, name, want string) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(resolvedtest.Wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got = lookup(name); got == want {
				return
			}
		}
		t.Fatalf("%s: %s → %s, want %s", when, name, got, want)
	}
	busEnv := "DBUS_SYSTEM_BUS_ADDRESS=" + bus
	ctx := context.Background()
	signedIn := false
	for _, point := range []string{"dns-changes.json-renamed", "resolved-link-dns", "resolved-link-domains"} {
		l.env = []string{"RUNOS_FAULT=" + point, busEnv}
		l.start()
		if !signedIn {
			l.signIn(t)
			signedIn = true
		}
		if _, err := l.client.Connect(ctx, "ky3"); err == nil {
			l.waitStatusOrExit("ky3 up", peerUp("ky3"))
		}
		if code := l.waitExit(15 * time.Second); code != fault.ExitCode || !strings.Contains(l.lastOutput, "fault: stopped dead at "+point) {
			t.Fatalf("%s: the daemon did not stop there (exit %d)\n%s", point, code, l.lastOutput)
		}
		out, err := l.laptop.Command(ctx, "env", busEnv, l.bin, "vpnd", "--cleanup", "--state-dir", l.stateDir,
			"--socket", l.socket, "--interface", l.iface).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: --cleanup: %v\n%s", point, err, out)
		}
		if s := res.Resolvectl(t, "dns"); strings.Contains(s, ky3Private) {
			t.Fatalf("%s: after --cleanup resolved still sends names to %s:\n%s", point, ky3Private, s)
		}
		if b, err := os.ReadFile(filepath.Join(l.stateDir, "dns-changes.json")); err == nil {
			t.Fatalf("%s: still recorded after --cleanup:\n%s", point, b)
		}
		waitLookup(point+", after --cleanup", "www.example.test", www)
		waitLookup(point+", after --cleanup", "app.ky3.rjwrn.example.com", ky3Public)

		l.env = []string{busEnv}
		l.start()
		st, err := l.client.Status(ctx)
		if err != nil || !cluster(*st, "ky3").Wanted {
			t.Fatalf("%s: after the restart ky3 is not wanted: %+v %v", point, st, err)
		}
		l.waitStatus("ky3 back", peerUp("ky3"))
		waitLookup(point+", restarted", "app.ky3.rjwrn.example.com", ky3Private)
		waitLookup(point+", restarted", "www.example.test", www)
		if _, err := l.client.Disconnect(ctx, "ky3"); err != nil {
			t.Fatal(err)
		}
		waitLookup(point+", disconnected", "app.ky3.rjwrn.example.com", ky3Public)
		l.waitStatus("ky3 disconnected", func(st *localapi.Status) bool { return !cluster(*st, "ky3").Wanted })
		l.stop()
	}
}
