package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildAll builds every package of amd64 from the real programs (built
// here, as make cross builds them: their build information is what the
// notices are made from; the docs come from the real command tree).
func buildAll(t *testing.T) (dir string, made []string, pkgs []pkg) {
	t.Helper()
	built.once.Do(func() { built.dir, built.made, built.pkgs, built.err = buildAllOnce() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir, built.made, built.pkgs
}

// built is buildAll's one build, shared by the tests that read packages
// back; TestMain removes it.
var built struct {
	once sync.Once
	dir  string
	made []string
	pkgs []pkg
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func buildAllOnce() (dir string, made []string, pkgs []pkg, err error) {
	if dir, err = os.MkdirTemp("", "runos-packaging-test-"); err != nil {
		return "", nil, nil, err
	}
	bin := filepath.Join(dir, "bin", "linux-amd64")
	gobuild := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "./cmd/runos", "./cmd/runos-control", "./cmd/runos-gateway")
	gobuild.Dir = ".."
	gobuild.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := gobuild.CombinedOutput(); err != nil {
		return dir, nil, nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	c := config{bin: filepath.Join(dir, "bin"), root: "..", out: filepath.Join(dir, "dist"), version: "v1.2.3-4-gabcdef",
		mtime: time.Unix(1764806400, 0), arches: []string{"amd64"}, formats: []string{"deb", "rpm"}}
	if made, err = build(c); err != nil {
		return dir, nil, nil, err
	}
	// The same list the packages were built from, for the checks.
	tmp := filepath.Join(dir, "list")
	docs := filepath.Join(tmp, "docs")
	if err := writeDocs(docs, c.mtime); err != nil {
		return dir, nil, nil, err
	}
	pkgs, err = packages(inputs{bin: bin, docs: docs, root: "..", tmp: tmp})
	return dir, made, pkgs, err
}

func need(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("RUNOS_E2E") == "1" {
			t.Fatalf("%s is missing (Debian's %s package; .ci/deps install test)", tool, tool)
		}
		t.Skipf("%s is missing", tool)
	}
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// want is the files of p as format installs them.
func want(p pkg, format string) []string {
	var w []string
	for _, f := range p.files {
		if f.packager == "" || f.packager == format {
			w = append(w, f.dst)
		}
	}
	slices.Sort(w)
	return w
}

// TestPackagesHoldTheirFiles reads each built .deb (dpkg-deb -c) and .rpm
// (rpm -qlp) back: each holds exactly its list, with its licence and
// notices, and runos a man page per command and the three completions.
func TestPackagesHoldTheirFiles(t *testing.T) {
	need(t, "dpkg-deb")
	need(t, "rpm")
	_, made, pkgs := buildAll(t)
	if len(made) != 6 {
		t.Fatalf("made %v", made)
	}
	for _, p := range pkgs {
		deb := filepath.Join(filepath.Dir(made[0]), p.name+"_1.2.3+4.gabcdef_amd64.deb")
		var got []string
		for _, line := range strings.Split(output(t, "dpkg-deb", "-c", deb), "\n") {
			f := strings.Fields(line)
			if len(f) >= 6 && !strings.HasSuffix(f[5], "/") {
				got = append(got, strings.TrimPrefix(f[5], "."))
			}
		}
		slices.Sort(got)
		if w := want(p, "deb"); !slices.Equal(got, w) {
			t.Errorf("%s holds\n %v\nwant\n %v", deb, got, w)
		}
		rpm := filepath.Join(filepath.Dir(made[0]), p.name+"-1.2.3+4.gabcdef-1.x86_64.rpm")
		got = strings.Fields(output(t, "rpm", "-qlp", rpm))
		slices.Sort(got)
		if w := want(p, "rpm"); !slices.Equal(got, w) {
			t.Errorf("%s holds\n %v\nwant\n %v", rpm, got, w)
		}
	}
	for _, p := range pkgs { // the licence, as each distribution has it (TestPackagesCarryTheLicence reads it)
		for format, files := range map[string][]string{"deb": {"/usr/share/doc/" + p.name + "/copyright"},
			"rpm": {"/usr/share/licenses/" + p.name + "/LICENSE", "/usr/share/licenses/" + p.name + "/THIRD_PARTY_NOTICES"}} {
			for _, f := range files {
				if !slices.Contains(want(p, format), f) {
					t.Errorf("the %s of %s lacks %s", format, p.name, f)
				}
			}
		}
	}
	runos := want(pkgs[0], "deb")
	for _, f := range []string{"/usr/bin/runos", "/usr/share/man/man1/runos.1.gz", "/usr/share/man/man1/runos-vpn-up.1.gz",
		"/usr/share/man/man1/runos-vpn-install.1.gz", "/usr/share/bash-completion/completions/runos",
		"/usr/share/zsh/vendor-completions/_runos", "/usr/share/fish/vendor_completions.d/runos.fish"} {
		if !slices.Contains(runos, f) {
			t.Errorf("runos lacks %s", f)
		}
	}
}

// TestScriptsStartNothing: no maintainer script starts, restarts or
// enables a service, or runs runos vpn install (the user's one step).
func TestScriptsStartNothing(t *testing.T) {
	starts := regexp.MustCompile(`(systemctl|service|invoke-rc\.d|update-rc\.d|deb-systemd-invoke)\b[^#\n]*\b(start|restart|enable|reload-or-restart|try-restart)\b|vpn install`)
	ents, err := assets.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, _ := assets.ReadFile("scripts/" + e.Name())
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "#")
			if m := starts.FindString(code); m != "" && !strings.Contains(code, "disable --now") {
				t.Errorf("%s:%d starts something: %q", e.Name(), i+1, line)
			}
		}
		if out, err := exec.Command("sh", "-n", "-c", string(b)).CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n: %v %s", e.Name(), err, out)
		}
	}
}

// TestUnitsVerify runs systemd-analyze verify over the two units, with
// the programs they name in place.
func TestUnitsVerify(t *testing.T) {
	need(t, "systemd-analyze")
	dir := t.TempDir()
	if err := writeAssets(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"runos-control.service", "runos-gateway.service"} {
		unit := filepath.Join(dir, "etc", name)
		b, _ := os.ReadFile(unit)
		// The programs are not installed here: point ExecStart at one that is.
		s := strings.NewReplacer("/usr/bin/runos-control", "/bin/true", "/usr/bin/runos-gateway", "/bin/true").Replace(string(b))
		os.WriteFile(unit, []byte(s), 0o644)
		out, err := exec.Command("systemd-analyze", "verify", "--man=no", unit).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("%s: systemd-analyze verify: %v\n%s", name, err, out)
		}
	}
}

func TestDebVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3":              "1.2.3",
		"v1.2.3-4-gabcdef":    "1.2.3+4.gabcdef",
		"v1.2.3-rc1":          "1.2.3~rc1",
		"128d0e0":             "0.0.0+git.128d0e0",
		"128d0e0-dirty":       "0.0.0+git.128d0e0.dirty",
		"v1.2.3-4-gabc-dirty": "1.2.3+4.gabc.dirty",
	} {
		if got := debVersion(in); got != want {
			t.Errorf("debVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
