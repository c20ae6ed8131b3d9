package installer

import (
	"encoding/xml"
	"os/exec"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/testenv"
)

// The paths in a Spec come from the command line; whatever they hold, a
// rendered definition must carry them as data, never as new directives.

var unitKeys = map[string]bool{}

func init() {
	for _, l := range strings.Split(systemdUnit(linuxSpec()), "\n") {
		if k, _, ok := strings.Cut(l, "="); ok {
			unitKeys[k] = true
		}
	}
}

func fuzzSpec(bin, state, socket, iface string) Spec {
	s := linuxSpec()
	s.Binary, s.StateDir, s.Socket, s.Interface = "/"+bin, "/"+state, "/"+socket, iface
	return s
}

func FuzzSystemdUnit(f *testing.F) {
	f.Add("usr/local/bin/runos", "var/lib/runos", "run/runos/vpnd.sock", "")
	f.Add("opt/run os/runos", "srv/a\"b", "tmp/x;y/s.sock", "wg%1")
	f.Add("x\nExecStartPre=/bin/evil", "y", "z", "$(id)")
	f.Fuzz(func(t *testing.T, bin, state, socket, iface string) {
		s := fuzzSpec(bin, state, socket, iface)
		if s.checkPaths() != nil {
			return // refused before rendering
		}
		for _, l := range strings.Split(systemdUnit(s), "\n") {
			if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]") && !strings.Contains(l, "=") {
				continue
			}
			k, _, ok := strings.Cut(l, "=")
			if !ok || !unitKeys[k] {
				t.Fatalf("line %q is not one of the unit's keys (spec %+v)", l, s)
			}
		}
	})
}

func FuzzLaunchdPlist(f *testing.F) {
	f.Add("usr/local/bin/runos", "Library/Application Support/RunOS", "var/run/runos/vpnd.sock", "")
	f.Add("a<b", "c&d", "]]></string><key>", "\"'")
	f.Fuzz(func(t *testing.T, bin, state, socket, iface string) {
		s := fuzzSpec(bin, state, socket, iface)
		s.Name = "com.runos.vpnd"
		if s.checkPaths() != nil {
			return
		}
		var doc struct {
			Dict struct {
				Strings []string `xml:"array>string"`
			} `xml:"dict"`
		}
		if err := xml.Unmarshal([]byte(launchdPlist(s)), &doc); err != nil {
			t.Fatalf("plist does not parse: %v", err)
		}
		// The strings read back are exactly the wrapper's arguments, the
		// paths inside its script quoted as sh words (FuzzShellQuote).
		if want := launchdArgs(s); strings.Join(doc.Dict.Strings, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("ProgramArguments %q, want %q", doc.Dict.Strings, want)
		}
	})
}

// FuzzShellQuote has a real sh read each quoted word back.
func FuzzShellQuote(f *testing.F) {
	testenv.Tools(f, "sh")
	for _, s := range []string{"", "a b", "it's", "$(id)", "`id`", "\\", "'\"'", "*", "~root", "-n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			return // no argument can carry NUL
		}
		out, err := exec.Command("sh", "-c", "printf '%s' "+shellQuote(s)).Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if string(out) != s {
			t.Fatalf("sh read %q back as %q", s, out)
		}
	})
}
