package installer

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/testenv"
)

func linuxSpec() Spec {
	return Spec{
		Name: "runos-vpnd", DisplayName: displayName, Description: description,
		Binary: "/usr/local/bin/runos", StateDir: "/var/lib/runos", Socket: "/run/runos/vpnd.sock",
		LogFile: "/var/log/runos-vpnd.log", PIDFile: "/var/run/runos-vpnd.pid",
		ReadWritePaths: []string{"/etc", "-/run/resolvconf"},
	}
}

func TestSystemdUnit(t *testing.T) {
	u := systemdUnit(linuxSpec())
	for _, line := range []string{
		"ExecStart=/usr/local/bin/runos vpnd --state-dir /var/lib/runos --socket /run/runos/vpnd.sock",
		"ExecStopPost=/usr/local/bin/runos vpnd --cleanup --state-dir /var/lib/runos --socket /run/runos/vpnd.sock",
		"Restart=on-failure",
		"RuntimeDirectory=runos wireguard",
		"RuntimeDirectoryPreserve=yes",
		"StateDirectory=runos",
		"StateDirectoryMode=0700",
		"CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_BIND_SERVICE CAP_NET_RAW",
		"AmbientCapabilities=CAP_NET_ADMIN CAP_NET_BIND_SERVICE CAP_NET_RAW",
		"DevicePolicy=closed",
		"DeviceAllow=/dev/net/tun rw",
		"ProtectSystem=strict",
		"ReadWritePaths=/etc -/run/resolvconf",
		"ProtectHome=yes",
		"NoNewPrivileges=yes",
		"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
		"WantedBy=multi-user.target",
	} {
		if !hasLine(u, line) {
			t.Errorf("unit lacks %q:\n%s", line, u)
		}
	}
	// Nothing would hide /dev/net/tun or forbid what the daemon does.
	for _, bad := range []string{"PrivateDevices=yes", "PrivateNetwork=yes", "User=", "{{"} {
		if strings.Contains(u, bad) {
			t.Errorf("unit has %q", bad)
		}
	}

	// Paths elsewhere become writable explicitly; odd characters are quoted.
	s := linuxSpec()
	s.StateDir = "/srv/runos state"
	s.Socket = "/tmp/e2e/vpnd.sock"
	s.Interface = "wg%7"
	s.CAFile = "/srv/runos state/control-ca.pem"
	u = systemdUnit(s)
	for _, line := range []string{
		`ExecStart=/usr/local/bin/runos vpnd --state-dir "/srv/runos state" --socket /tmp/e2e/vpnd.sock --interface wg%%7 --ca-file "/srv/runos state/control-ca.pem"`,
		`ExecStopPost=/usr/local/bin/runos vpnd --cleanup --state-dir "/srv/runos state" --socket /tmp/e2e/vpnd.sock --interface wg%%7`,
		"RuntimeDirectory=wireguard",
		`ReadWritePaths=-/tmp/e2e "/srv/runos state" /etc -/run/resolvconf`,
	} {
		if !hasLine(u, line) {
			t.Errorf("unit lacks %q:\n%s", line, u)
		}
	}
	if strings.Contains(u, "StateDirectory=") {
		t.Error("StateDirectory= for a state directory outside /var/lib")
	}
}

func TestSystemdQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/runos": "/usr/bin/runos",
		"a b":            `"a b"`,
		`a"b`:            `"a\"b"`,
		`a\b`:            `"a\\b"`,
		"50%":            "50%%",
		"$HOME":          "$$HOME",
		"":               `""`,
		"a;b":            `"a;b"`,
	} {
		if got := systemdQuote(in); got != want {
			t.Errorf("systemdQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestLaunchdPlist(t *testing.T) {
	s := Spec{Name: "com.runos.vpnd", Binary: "/usr/local/bin/runos", StateDir: "/Library/Application Support/RunOS",
		Socket: "/var/run/runos/vpnd.sock", CAFile: "/Library/Application Support/RunOS/control-ca.pem",
		LogFile: "/var/log/com.runos.vpnd.log", Interface: "a<b&c"}
	p := launchdPlist(s)
	// A well-formed plist whose dict says what launchd must do.
	got, args := parsePlist(t, p)
	for k, want := range map[string]string{"Label": "com.runos.vpnd", "RunAtLoad": "true", "KeepAlive": "true",
		"ExitTimeOut": "30", "ThrottleInterval": "5",
		"StandardErrorPath": "/var/log/com.runos.vpnd.log", "StandardOutPath": "/var/log/com.runos.vpnd.log"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	// launchd runs sh with the wrapper, named after the service, which
	// runs the daemon and then the clean-up (launchd has no ExecStopPost).
	if len(args) != 4 || args[0] != "/bin/sh" || args[1] != "-c" || args[3] != "com.runos.vpnd" {
		t.Fatalf("ProgramArguments %q, want /bin/sh -c SCRIPT com.runos.vpnd", args)
	}
	script := args[2]
	for _, line := range []string{
		`/usr/local/bin/runos vpnd --state-dir '/Library/Application Support/RunOS' --socket /var/run/runos/vpnd.sock --interface 'a<b&c' --ca-file '/Library/Application Support/RunOS/control-ca.pem' &`,
		`/usr/local/bin/runos vpnd --cleanup --state-dir '/Library/Application Support/RunOS' --socket /var/run/runos/vpnd.sock --interface 'a<b&c' || echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $0: the clean-up failed"`,
		`trap 'stopping=1; [ -z "$child" ] || kill -TERM "$child" 2>/dev/null' TERM INT`,
		`exit "$rc"`,
	} {
		if !hasLine(script, line) {
			t.Errorf("the wrapper lacks %q:\n%s", line, script)
		}
	}
	if strings.Index(script, " vpnd --state-dir") > strings.Index(script, " vpnd --cleanup") {
		t.Error("the clean-up comes before the daemon")
	}
	testenv.Tools(t, "sh")
	if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v\n%s", err, out)
	}
}

// parsePlist reads a one-dict plist: its keys' values (booleans as "true"
// or "false") and the strings of its array.
func parsePlist(t testing.TB, p string) (map[string]string, []string) {
	t.Helper()
	var doc struct {
		Dict struct {
			Items []struct {
				XMLName xml.Name
				Value   string   `xml:",chardata"`
				Strings []string `xml:"string"`
			} `xml:",any"`
		} `xml:"dict"`
	}
	if err := xml.Unmarshal([]byte(p), &doc); err != nil {
		t.Fatalf("plist: %v\n%s", err, p)
	}
	got := map[string]string{}
	var args []string
	for i := 0; i+1 < len(doc.Dict.Items); i += 2 {
		k, v := doc.Dict.Items[i], doc.Dict.Items[i+1]
		if k.XMLName.Local != "key" {
			t.Fatalf("item %d is %s, not a key", i, k.XMLName.Local)
		}
		switch v.XMLName.Local {
		case "array":
			args = v.Strings
		case "true", "false":
			got[k.Value] = v.XMLName.Local
		default:
			got[k.Value] = v.Value
		}
	}
	return got, args
}

func TestServiceConfigs(t *testing.T) {
	s := linuxSpec()
	for _, platform := range []string{PlatformSystemd, PlatformSysV, PlatformLaunchd, PlatformWindows} {
		c, err := serviceConfig(platform, s)
		if err != nil {
			t.Fatalf("%s: %v", platform, err)
		}
		if c.Name != "runos-vpnd" || c.Executable != s.Binary || strings.Join(c.Arguments, " ") != strings.Join(s.DaemonArgs(), " ") {
			t.Errorf("%s: config %+v", platform, c)
		}
		for k, v := range c.Option {
			if text, ok := v.(string); ok && strings.Contains(text, "{{") {
				t.Errorf("%s: option %s would be read as a template", platform, k)
			}
		}
	}
	// The Windows service: automatic start, restart after every failure.
	c, _ := serviceConfig(PlatformWindows, s)
	want := map[string]any{"StartType": "automatic", "DelayedAutoStart": false, "OnFailure": "restart",
		"OnFailureDelayDuration": "2s", "OnFailureResetPeriod": 86400}
	if len(c.Option) != len(want) {
		t.Errorf("windows options %v", c.Option)
	}
	for k, v := range want {
		if c.Option[k] != v {
			t.Errorf("windows option %s = %v (%T), want %v (%T)", k, c.Option[k], c.Option[k], v, v)
		}
	}
	c, _ = serviceConfig(PlatformLaunchd, s)
	if c.Option["RunAtLoad"] != true || c.Option["KeepAlive"] != true || c.Option["LaunchdConfig"] == nil {
		t.Errorf("launchd options %v", c.Option)
	}

	if _, err := serviceConfig("linux-openrc", s); err == nil || !strings.Contains(err.Error(), "linux-openrc") {
		t.Errorf("openrc: %v", err)
	}
	bad := s
	bad.Name = "runos vpnd"
	if _, err := serviceConfig(PlatformSystemd, bad); err == nil {
		t.Error("a name with a space accepted")
	}
	bad = s
	bad.Binary = "/usr/local/bin/run\x05os" // XML would turn it into U+FFFD: another path
	if _, err := serviceConfig(PlatformLaunchd, bad); err == nil {
		t.Error("a control character in a path accepted")
	}
	bad = s
	bad.StateDir = "/var/lib/{{x}}"
	if _, err := serviceConfig(PlatformSysV, bad); err == nil {
		t.Error("{{ in a path accepted")
	}
}

func TestRemoveSysVLinks(t *testing.T) {
	etc := t.TempDir()
	for _, rc := range []string{"rc0.d", "rc2.d", "rc5.d"} {
		os.MkdirAll(filepath.Join(etc, rc), 0o755)
	}
	for _, l := range []string{"rc2.d/S50runos-vpnd", "rc5.d/S50runos-vpnd", "rc0.d/K02runos-vpnd", "rc2.d/S50runos-vpnd-other", "rc2.d/S01dbus"} {
		if err := os.Symlink("../init.d/x", filepath.Join(etc, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeSysVLinks(etc, "runos-vpnd"); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(etc, "rc*.d", "*"))
	for i := range left {
		left[i], _ = filepath.Rel(etc, left[i])
	}
	if strings.Join(left, " ") != "rc2.d/S01dbus rc2.d/S50runos-vpnd-other" {
		t.Errorf("left %v", left)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/local/bin/runos": "/usr/local/bin/runos",
		"a b":                  "'a b'",
		"it's":                 `'it'\''s'`,
		"$(rm -rf /)":          "'$(rm -rf /)'",
		"":                     "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}
