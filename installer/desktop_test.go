package installer

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/desktop/icons"
	"github.com/runos/vpn/desktop/menu"
)

// desktopWorld is a user's machine in a temporary directory: home, the
// build (bin/runos and bin/runos-desktop), and fakes for launchctl and the
// registry.
type desktopWorld struct {
	root, home, bin string
	env             map[string]string
	ran             []string
	runKey          *fakeRunKey
	o               DesktopOptions
}

type fakeRunKey struct{ values map[string]string }

func (k *fakeRunKey) Get(n string) (string, bool, error) { v, ok := k.values[n]; return v, ok, nil }
func (k *fakeRunKey) Set(n, v string) error              { k.values[n] = v; return nil }
func (k *fakeRunKey) Delete(n string) error              { delete(k.values, n); return nil }

func newDesktopWorld(t *testing.T, item loginItem) *desktopWorld {
	root := t.TempDir()
	w := &desktopWorld{root: root, home: filepath.Join(root, "home", "alice"), bin: filepath.Join(root, "src", "bin"),
		env: map[string]string{}, runKey: &fakeRunKey{values: map[string]string{}}}
	os.MkdirAll(w.home, 0o755)
	os.MkdirAll(w.bin, 0o755)
	os.WriteFile(filepath.Join(w.bin, "runos"), []byte("runos"), 0o755)
	os.WriteFile(filepath.Join(w.bin, item.program()), []byte("desktop v1"), 0o755)
	apps := filepath.Join(root, "Applications")
	os.MkdirAll(apps, 0o775)
	w.o = DesktopOptions{
		Applications: apps,
		item:         item,
		env: &desktopEnv{
			home:   w.home,
			getenv: func(k string) string { return w.env[k] },
			uid:    501,
			exe:    func() (string, error) { return filepath.Join(w.bin, "runos"), nil },
			run: func(argv []string) ([]byte, error) {
				w.ran = append(w.ran, strings.Join(argv, " "))
				return nil, nil
			},
			runKey: w.runKey,
		},
	}
	return w
}

func (w *desktopWorld) take() []string { r := w.ran; w.ran = nil; return r }

func TestDesktopXDG(t *testing.T) {
	w := newDesktopWorld(t, xdgItem{})
	var progress bytes.Buffer
	w.o.Progress = &progress
	res, err := InstallDesktop(w.o)
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(w.home, ".local", "bin", "runos-desktop")
	autostart := filepath.Join(w.home, ".config", "autostart", "runos-desktop.desktop")
	if res.Program != prog || res.LoginItem != autostart || res.Started {
		t.Errorf("result %+v", res)
	}
	if readFile(t, prog) != "desktop v1" {
		t.Error("program not copied")
	}
	a := readFile(t, autostart)
	for _, line := range []string{"[Desktop Entry]", "Type=Application", "Name=RunOS Desktop",
		"Exec=" + prog + " --at-login", "TryExec=" + prog, "Icon=runos-desktop", "X-GNOME-Autostart-enabled=true", "NoDisplay=true"} {
		if !hasLine(a, line) {
			t.Errorf("autostart entry lacks %q:\n%s", line, a)
		}
	}
	app := readFile(t, filepath.Join(w.home, ".local", "share", "applications", "runos-desktop.desktop"))
	if !hasLine(app, "Exec="+prog) || strings.Contains(app, "--at-login") || strings.Contains(app, "NoDisplay") {
		t.Errorf("application entry:\n%s", app)
	}
	if icon := readFile(t, filepath.Join(w.home, ".local", "share", "icons", "hicolor", "32x32", "apps", "runos-desktop.png")); icon != string(icons.PNG(menu.IconConnected)) {
		t.Error("icon differs")
	}
	if len(w.take()) != 0 {
		t.Error("commands run on Linux")
	}

	// XDG_CONFIG_HOME and XDG_DATA_HOME are honoured; installing again replaces.
	w.env["XDG_CONFIG_HOME"] = filepath.Join(w.root, "cfg")
	w.env["XDG_DATA_HOME"] = filepath.Join(w.root, "data")
	os.WriteFile(filepath.Join(w.bin, "runos-desktop"), []byte("desktop v2"), 0o755)
	if _, err := InstallDesktop(w.o); err != nil {
		t.Fatal(err)
	}
	if readFile(t, prog) != "desktop v2" {
		t.Error("not replaced")
	}
	for _, p := range []string{"cfg/autostart/runos-desktop.desktop", "data/applications/runos-desktop.desktop"} {
		if _, err := os.Stat(filepath.Join(w.root, p)); err != nil {
			t.Error(err)
		}
	}

	res2, err := UninstallDesktop(w.o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res2.Removed) != 4 {
		t.Errorf("removed %v", res2.Removed)
	}
	for _, p := range []string{prog, filepath.Join(w.root, "cfg/autostart/runos-desktop.desktop")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left", p)
		}
	}
	if res3, err := UninstallDesktop(w.o); err != nil || len(res3.Removed) != 0 {
		t.Errorf("second uninstall: %+v %v", res3, err)
	}
}

func TestDesktopExecQuoting(t *testing.T) {
	for in, want := range map[string]string{
		"/home/a/.local/bin/runos-desktop": "/home/a/.local/bin/runos-desktop",
		"/home/a b/runos-desktop":          `"/home/a b/runos-desktop"`,
		`/x/$HOME"q`:                       `"/x/\\$HOME\\"q"`,
		"/x/100%":                          "/x/100%%",
	} {
		if got := desktopExecArg(in); got != want {
			t.Errorf("desktopExecArg(%q) = %s, want %s", in, got, want)
		}
	}
	a := desktopFile("/home/a b/.local/bin/runos-desktop", true)
	if !hasLine(a, `Exec="/home/a b/.local/bin/runos-desktop" --at-login`) {
		t.Errorf("entry:\n%s", a)
	}
}

func TestDesktopAppBundle(t *testing.T) {
	w := newDesktopWorld(t, appBundleItem{})
	res, err := InstallDesktop(w.o)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(w.o.Applications, "RunOS Desktop.app")
	prog := filepath.Join(bundle, "Contents", "MacOS", "runos-desktop")
	agent := filepath.Join(w.home, "Library", "LaunchAgents", "com.runos.desktop.plist")
	if res.Program != prog || res.LoginItem != agent || !res.Started {
		t.Errorf("result %+v", res)
	}
	if readFile(t, prog) != "desktop v1" {
		t.Error("program not in the bundle")
	}
	info := plistDict(t, readFile(t, filepath.Join(bundle, "Contents", "Info.plist")))
	for k, v := range map[string]string{"CFBundleIdentifier": "com.runos.desktop", "CFBundleExecutable": "runos-desktop",
		"CFBundlePackageType": "APPL", "LSUIElement": "true", "CFBundleName": "RunOS Desktop"} {
		if info[k] != v {
			t.Errorf("Info.plist %s = %q, want %q", k, info[k], v)
		}
	}
	ag := plistDict(t, readFile(t, agent))
	for k, v := range map[string]string{"Label": "com.runos.desktop", "ProgramArguments": prog + " --at-login",
		"RunAtLoad": "true", "KeepAlive": "false", "LimitLoadToSessionType": "Aqua"} {
		if ag[k] != v {
			t.Errorf("LaunchAgent %s = %q, want %q", k, ag[k], v)
		}
	}
	if ran := w.take(); !slices.Equal(ran, []string{
		"/bin/launchctl bootout gui/501/com.runos.desktop",
		"/bin/launchctl bootstrap gui/501 " + agent,
	}) {
		t.Errorf("ran %q", ran)
	}
	left, _ := filepath.Glob(filepath.Join(w.o.Applications, ".*"))
	if len(left) != 0 {
		t.Errorf("temporary bundles left: %v", left)
	}
	// Again: the old bundle is replaced whole.
	os.WriteFile(filepath.Join(bundle, "Contents", "stale"), nil, 0o644)
	if _, err := InstallDesktop(w.o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bundle, "Contents", "stale")); err == nil {
		t.Error("the old bundle was not replaced")
	}
	w.take()
	if _, err := UninstallDesktop(w.o); err != nil {
		t.Fatal(err)
	}
	if ran := w.take(); !slices.Equal(ran, []string{"/bin/launchctl bootout gui/501/com.runos.desktop"}) {
		t.Errorf("ran %q", ran)
	}
	for _, p := range []string{bundle, agent} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left", p)
		}
	}
	if v := infoPlist("v1.2.3-4-gabc"); !strings.Contains(v, "<string>1.2.3</string>") {
		t.Errorf("version: %s", v)
	}
	if v := infoPlist("dev"); !strings.Contains(v, "<string>0.0.0</string>") {
		t.Errorf("dev version: %s", v)
	}
}

func TestDesktopRunKey(t *testing.T) {
	w := newDesktopWorld(t, runKeyItem{})
	w.env["LOCALAPPDATA"] = filepath.Join(w.home, "AppData", "Local")
	res, err := InstallDesktop(w.o)
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(w.home, "AppData", "Local", "Programs", "RunOS", "runos-desktop.exe")
	if res.Program != prog || res.LoginItem != `HKCU\Software\Microsoft\Windows\CurrentVersion\Run\RunOS Desktop` {
		t.Errorf("result %+v", res)
	}
	if readFile(t, prog) != "desktop v1" {
		t.Error("program not copied")
	}
	if got := w.runKey.values["RunOS Desktop"]; got != `"`+prog+`" --at-login` {
		t.Errorf("Run value %q", got)
	}
	if len(w.runKey.values) != 1 || len(w.take()) != 0 {
		t.Errorf("registry %v", w.runKey.values)
	}
	w.runKey.values["Other"] = "x"
	if _, err := UninstallDesktop(w.o); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.runKey.values["RunOS Desktop"]; ok || w.runKey.values["Other"] != "x" {
		t.Errorf("registry after uninstall %v", w.runKey.values)
	}
	if _, err := os.Stat(prog); err == nil {
		t.Error("program left")
	}
}

func TestDesktopRefusals(t *testing.T) {
	w := newDesktopWorld(t, xdgItem{})
	os.Remove(filepath.Join(w.bin, "runos-desktop"))
	_, err := InstallDesktop(w.o)
	if err == nil || !strings.Contains(err.Error(), "RunOS Desktop is not built") || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "--from") {
		t.Errorf("absent: %v", err)
	}
	w.o.From = filepath.Join(w.root, "nope")
	if _, err := InstallDesktop(w.o); err == nil || !strings.Contains(err.Error(), "--from "+w.o.From) {
		t.Errorf("missing --from: %v", err)
	}
	w.o.From = w.bin
	if _, err := InstallDesktop(w.o); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	w.o.From = filepath.Join(w.root, "plain")
	os.WriteFile(w.o.From, nil, 0o644)
	if _, err := InstallDesktop(w.o); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("not executable: %v", err)
	}
	w.o.From = ""
	w.o.env.sudo = true
	if _, err := InstallDesktop(w.o); err == nil || !strings.Contains(err.Error(), "without sudo: runos desktop install") {
		t.Errorf("sudo: %v", err)
	}
	if entries, _ := os.ReadDir(w.home); len(entries) != 0 {
		t.Errorf("refusals wrote into home: %v", entries)
	}
}

// plistDict reads a one-dict plist into key → value (arrays joined by
// spaces, booleans as true/false).
func plistDict(t *testing.T, text string) map[string]string {
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
	if err := xml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("plist: %v\n%s", err, text)
	}
	out := map[string]string{}
	items := doc.Dict.Items
	for i := 0; i+1 < len(items); i += 2 {
		v := items[i+1]
		switch v.XMLName.Local {
		case "array":
			out[items[i].Value] = strings.Join(v.Strings, " ")
		case "true", "false":
			out[items[i].Value] = v.XMLName.Local
		default:
			out[items[i].Value] = v.Value
		}
	}
	return out
}
