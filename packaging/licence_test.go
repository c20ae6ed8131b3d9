package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// linkedKnown are modules each program is known to link, which its
// notices must name.
var linkedKnown = map[string][]string{
	"runos":         {"golang.zx2c4.com/wireguard", "github.com/spf13/cobra", "github.com/miekg/dns"},
	"runos-control": {"github.com/jackc/pgx/v5", "modernc.org/sqlite", "github.com/spf13/cobra"},
	"runos-gateway": {"golang.zx2c4.com/wireguard", "golang.zx2c4.com/wireguard/wgctrl"},
}

// TestPackagesCarryTheLicence reads each built package's licence back:
// the .deb's /usr/share/doc/<package>/copyright is LICENSE then the
// program's notices; the .rpm says License: Proprietary and its %license
// files are /usr/share/licenses/<package>/LICENSE (the repository's) and
// THIRD_PARTY_NOTICES (the same notices); and the notices name every
// module `go version -m` lists in the program, known ones among them, with
// their licence's full text, and Go's licence.
func TestPackagesCarryTheLicence(t *testing.T) {
	need(t, "dpkg-deb")
	need(t, "rpm")
	need(t, "rpm2archive")
	dir, _, pkgs := buildAll(t)
	licence, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(licence, []byte("Copyright (c) 2026 RunOS. All rights reserved.")) {
		t.Errorf("LICENSE does not reserve RunOS's rights:\n%s", licence)
	}
	for _, p := range pkgs {
		deb := filepath.Join(dir, "dist", p.name+"_1.2.3+4.gabcdef_amd64.deb")
		copyright := string(unpack(t, deb, "dpkg-deb --fsys-tarfile \"$0\" | tar -x", "/usr/share/doc/"+p.name+"/copyright")[0])
		own, notices, ok := strings.Cut(copyright, "\n"+strings.Repeat("-", 72)+"\n\n")
		if !ok || own != string(licence) {
			t.Errorf("%s: copyright does not open with LICENSE and a rule:\n%.600s", deb, copyright)
		}
		checkNotices(t, p, notices)

		rpm := filepath.Join(dir, "dist", p.name+"-1.2.3+4.gabcdef-1.x86_64.rpm")
		if got := output(t, "rpm", "-qp", "--qf", "%{LICENSE}", rpm); got != "Proprietary" {
			t.Errorf("%s: License %q, want Proprietary", rpm, got)
		}
		lic := "/usr/share/licenses/" + p.name + "/"
		if got := strings.Fields(output(t, "rpm", "-qp", "--licensefiles", rpm)); !slices.Equal(got, []string{lic + "LICENSE", lic + "THIRD_PARTY_NOTICES"}) {
			t.Errorf("%s: %%license files %v", rpm, got)
		}
		got := unpack(t, rpm, "rpm2archive - < \"$0\" | tar -x -z", lic+"LICENSE", lic+"THIRD_PARTY_NOTICES")
		if !bytes.Equal(got[0], licence) {
			t.Errorf("%s: %sLICENSE is not the repository's:\n%s", rpm, lic, got[0])
		}
		if string(got[1]) != notices {
			t.Errorf("%s: THIRD_PARTY_NOTICES differs from the .deb's notices", rpm)
		}
	}
}

// unpack reads files out of a package through a shell pipe ending in a
// tar that extracts the members named after it (./ and each path).
func unpack(t *testing.T, pkg, pipe string, paths ...string) [][]byte {
	t.Helper()
	dir := t.TempDir()
	args := []string{"-c", `d=$1; shift; ` + pipe + ` -C "$d" "$@"`, pkg, dir}
	for _, p := range paths {
		args = append(args, "."+p)
	}
	cmd := exec.Command("sh", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: unpack %v: %v\n%s", pkg, paths, err, out)
	}
	var got [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		got = append(got, b)
	}
	return got
}

// checkNotices: the notices of p's program name every module go version
// -m lists in it, the known ones among them, with the text of each known
// one's licence as its module directory has it, and Go's licence.
func checkNotices(t *testing.T, p pkg, notices string) {
	t.Helper()
	name := filepath.Base(p.program)
	if !strings.HasPrefix(notices, "Third-party software in "+name+"\n") {
		t.Errorf("%s: notices open with %.80q", p.name, notices)
	}
	goroot, err := goroot("..")
	if err != nil {
		t.Fatal(err)
	}
	goLicence, err := os.ReadFile(filepath.Join(goroot, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notices, "Go standard library and runtime go1.") || !strings.Contains(notices, string(goLicence)) {
		t.Errorf("%s: notices lack Go's licence", p.name)
	}
	linked := map[string]string{} // path: version
	for _, line := range strings.Split(output(t, "go", "version", "-m", p.program), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "dep" {
			linked[f[1]] = f[2]
		}
	}
	if len(linked) < 5 {
		t.Fatalf("%s: go version -m lists %v", p.program, linked)
	}
	for path, version := range linked {
		if !strings.Contains(notices, "\n  module "+path+" "+version+"\n") {
			t.Errorf("%s: notices do not list module %s %s", p.name, path, version)
		}
	}
	for _, path := range linkedKnown[p.name] {
		version, ok := linked[path]
		if !ok {
			t.Errorf("%s does not link %s (go version -m)", p.program, path)
			continue
		}
		cmd := exec.Command("go", "mod", "download", "-json", path+"@"+version)
		cmd.Dir = ".."
		out, err := cmd.Output()
		var d struct{ Dir string }
		if err != nil || json.Unmarshal(out, &d) != nil {
			t.Fatalf("go mod download %s@%s: %v %s", path, version, err, out)
		}
		licences, _ := filepath.Glob(filepath.Join(d.Dir, "LICENSE*"))
		if len(licences) == 0 {
			t.Fatalf("%s: no LICENSE* in its module directory", path)
		}
		text, err := os.ReadFile(licences[0])
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Base(licences[0])
		header := "module " + path + " " + version + ": " + f + "\n" + strings.Repeat("=", 72) + "\n\n"
		if !strings.Contains(notices, header+string(text)) {
			t.Errorf("%s: notices lack %s's %s under its heading", p.name, path, f)
		}
	}
}

// TestNoticesRefuseAModuleWithoutALicence: among modules in fake
// directories, one with no licence file fails the notices with its name
// (and nothing is written); the licensed ones' LICENSE*, COPYING, NOTICE
// and PATENTS files are all taken, other files not.
func TestNoticesRefuseAModuleWithoutALicence(t *testing.T) {
	dir := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goroot := filepath.Join(dir, "go")
	write(filepath.Join(goroot, "LICENSE"), "Go's licence\n")
	write(filepath.Join(goroot, "PATENTS"), "Go's patent grant\n")
	licensed := module{path: "example.com/licensed", version: "v1.2.0", dir: filepath.Join(dir, "licensed")}
	for _, f := range []string{"LICENSE-APACHE", "LICENSE-MIT.md", "NOTICE", "COPYING", "PATENTS"} {
		write(filepath.Join(licensed.dir, f), "text of "+f+"\n")
	}
	write(filepath.Join(licensed.dir, "license_test.go"), "package licensed\n")
	write(filepath.Join(licensed.dir, "README.md"), "read me\n")
	write(filepath.Join(licensed.dir, "licenses", "OTHER"), "in a directory\n")
	bare := module{path: "example.com/bare", version: "v0.3.1", dir: filepath.Join(dir, "bare")}
	write(filepath.Join(bare.dir, "README.md"), "no licence here\n")
	write(filepath.Join(bare.dir, "sub", "LICENSE"), "a licence of a package inside, not the module's\n")

	var b bytes.Buffer
	err := writeNotices(&b, "runos", "go1.26.8", goroot, []module{licensed, bare})
	if err == nil || !strings.Contains(err.Error(), "module example.com/bare v0.3.1: no licence file") || strings.Contains(err.Error(), "licensed") {
		t.Errorf("a module without a licence: error %v, want one naming example.com/bare v0.3.1 alone", err)
	}
	if b.Len() != 0 {
		t.Errorf("an incomplete notice was written:\n%s", b.String())
	}

	b.Reset()
	if err := writeNotices(&b, "runos", "go1.26.8", goroot, []module{licensed}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, s := range []string{"  Go standard library and runtime go1.26.8\n", "  module example.com/licensed v1.2.0\n",
		"Go's licence\n", "Go's patent grant\n", "module example.com/licensed v1.2.0: NOTICE\n"} {
		if !strings.Contains(got, s) {
			t.Errorf("notices lack %q:\n%s", s, got)
		}
	}
	for _, f := range []string{"LICENSE-APACHE", "LICENSE-MIT.md", "NOTICE", "COPYING", "PATENTS"} {
		if !strings.Contains(got, "text of "+f+"\n") {
			t.Errorf("notices lack %s", f)
		}
	}
	for _, s := range []string{"package licensed", "read me", "in a directory", "a package inside"} {
		if strings.Contains(got, s) {
			t.Errorf("notices hold %q, not a licence file", s)
		}
	}
}

// TestPackagesNeedTheProgramsBuildInformation: a program whose linked
// modules cannot be read (no Go build information) stops the packages
// instead of shipping notices that may lack some.
func TestPackagesNeedTheProgramsBuildInformation(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "linux-amd64")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"runos", "runos-control", "runos-gateway"} {
		if err := os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\necho "+p+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	docs := filepath.Join(dir, "docs")
	if err := writeDocs(docs, time.Unix(1764806400, 0)); err != nil {
		t.Fatal(err)
	}
	_, err := packages(inputs{bin: bin, docs: docs, root: "..", tmp: dir})
	if err == nil || !strings.Contains(err.Error(), "the modules "+filepath.Join(bin, "runos")+" links") {
		t.Errorf("a program without build information: error %v", err)
	}
}
