// Package macos holds what makes "RunOS Desktop.app": Info.plist and
// build-app.sh (run on a Mac by `make desktop-macos`). These tests check
// on any machine what can be checked without one.
package macos

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/testenv"
)

// plistDict reads the top-level dict of a property list into key → value
// ("true"/"false" for booleans).
func plistDict(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	d.Strict = true
	out := map[string]string{}
	var key, text string
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			depth++
			text = ""
			if depth == 3 && (tok.Name.Local == "true" || tok.Name.Local == "false") {
				out[key] = tok.Name.Local
			}
		case xml.CharData:
			text += string(tok)
		case xml.EndElement:
			if depth == 3 {
				switch tok.Name.Local {
				case "key":
					key = text
				case "string":
					out[key] = text
				}
			}
			depth--
		}
	}
	return out
}

func TestInfoPlist(t *testing.T) {
	p := plistDict(t, "Info.plist")
	want := map[string]string{
		"CFBundleExecutable":         "runos-desktop", // the binary build-app.sh puts in Contents/MacOS
		"CFBundleName":               "RunOS Desktop",
		"CFBundleIdentifier":         "com.runos.desktop",
		"CFBundlePackageType":        "APPL",
		"CFBundleIconFile":           "RunOS", // Resources/RunOS.icns
		"CFBundleShortVersionString": "@VERSION@",
		"LSUIElement":                "true", // no Dock icon: a menu-bar app
		"NSHighResolutionCapable":    "true",
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
}

func TestBuildScript(t *testing.T) {
	b, err := os.ReadFile("build-app.sh")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"CGO_ENABLED=1 GOOS=darwin", "Contents/MacOS/runos-desktop", "RunOS.icns", "desktop/macos/Info.plist", "codesign"} {
		if !strings.Contains(s, want) {
			t.Errorf("build-app.sh lacks %q", want)
		}
	}
	testenv.Tools(t, "sh")
	if out, err := exec.Command("sh", "-n", "build-app.sh").CombinedOutput(); err != nil {
		t.Fatalf("sh -n build-app.sh: %v: %s", err, out)
	}
}
