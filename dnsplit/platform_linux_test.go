package dnsplit

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestDecideLinux(t *testing.T) {
	stub := parseResolvConf([]byte("nameserver 127.0.0.53\noptions edns0 trust-ad\n"))
	lan := parseResolvConf([]byte("nameserver 10.77.0.53\n"))
	up := func() error { return nil }
	down := func() error {
		return errors.New("The name org.freedesktop.resolve1 was not provided by any .service files")
	}
	never := func() error { t.Error("probed the bus although resolv.conf does not use resolved"); return nil }
	cases := []struct {
		name   string
		f      linuxFacts
		probe  func() error
		mode   string
		reason string
	}{
		{"stub and resolved answering", linuxFacts{rc: stub, symlink: "../run/systemd/resolve/stub-resolv.conf", resolvedDir: true}, up,
			ModeResolved, "systemd-resolved manages DNS (/etc/resolv.conf links to ../run/systemd/resolve/stub-resolv.conf"},
		{"stub written as a file", linuxFacts{rc: stub}, up, ModeResolved, "points at its stub 127.0.0.53"},
		{"stub but resolved not answering", linuxFacts{rc: stub, resolvedDir: true}, down,
			ModeResolvConf, "does not answer on the system bus (The name org.freedesktop.resolve1 was not provided"},
		{"resolved runs, resolv.conf elsewhere", linuxFacts{rc: lan, resolvedDir: true}, never,
			ModeResolvConf, "lists 10.77.0.53, not the systemd-resolved stub (systemd-resolved may run, but glibc does not ask it)"},
		{"plain file", linuxFacts{rc: lan}, never, ModeResolvConf, "lists 10.77.0.53, not the systemd-resolved stub: fronting it with the built-in forwarder on 127.0.80.53:53"},
		{"no file", linuxFacts{readErr: fs.ErrNotExist}, never, ModeResolvConf, "does not exist (so glibc asks 127.0.0.1)"},
	}
	for _, c := range cases {
		c.f.path = "/etc/resolv.conf"
		mode, reason := decideLinux(c.f, "127.0.80.53:53", c.probe)
		if mode != c.mode || !strings.Contains(reason, c.reason) {
			t.Errorf("%s: %s, %q\nwant %s, …%q…", c.name, mode, reason, c.mode, c.reason)
		}
	}
}
