package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// module is one Go module a program links: its path and version as the
// program's build information records them, and its directory (in the
// module cache, or the replacement's directory).
type module struct {
	path, version, dir string
}

func (m module) String() string { return m.path + " " + m.version }

// linkedModules reads what `go version -m` prints of a program: the Go
// version that built it and every module it links, apart from its own
// (RunOS's, whose licence is LICENSE). A program without build
// information is an error: its notices cannot be known.
func linkedModules(program string) (goVersion string, mods []module, err error) {
	info, err := buildinfo.ReadFile(program)
	if err != nil {
		return "", nil, fmt.Errorf("the modules %s links: %w", program, err)
	}
	for _, d := range info.Deps {
		m := module{path: d.Path, version: d.Version}
		if r := d.Replace; r != nil {
			m = module{path: r.Path, version: r.Version}
			if r.Version == "" { // a directory: its path is the directory
				m.dir = r.Path
			}
		}
		mods = append(mods, m)
	}
	return info.GoVersion, mods, nil
}

// locate fills in the directory of each module that has none from the
// module cache (go mod download -json, run in the repository so that its
// go env applies; a module already there is not fetched again). A
// replacement directory is relative to the repository.
func locate(root string, mods []module) error {
	var args []string
	for i, m := range mods {
		switch {
		case m.dir != "" && !filepath.IsAbs(m.dir):
			mods[i].dir = filepath.Join(root, m.dir)
		case m.dir == "":
			args = append(args, m.path+"@"+m.version)
		}
	}
	if len(args) == 0 {
		return nil
	}
	cmd := exec.Command("go", append([]string{"mod", "download", "-json"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output() // on failure the JSON still says which module and why
	dirs := map[string]string{}
	var errs []error
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var d struct{ Path, Version, Dir, Error string }
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("go mod download: %v (%v) %s", err, runErr, stderr.Bytes())
		}
		if d.Error != "" {
			errs = append(errs, fmt.Errorf("module %s %s: %s", d.Path, d.Version, d.Error))
		}
		dirs[d.Path+"@"+d.Version] = d.Dir
	}
	for i, m := range mods {
		if mods[i].dir == "" {
			if mods[i].dir = dirs[m.path+"@"+m.version]; mods[i].dir == "" && len(errs) == 0 {
				errs = append(errs, fmt.Errorf("module %s: not in the module cache (go mod download: %v %s)", m, runErr, stderr.Bytes()))
			}
		}
	}
	return errors.Join(errs...)
}

// licenceName matches the files at the top of a module that its licence
// asks to be passed on: the licence itself (LICENSE, LICENCE, COPYING,
// UNLICENSE, with any suffix such as .md or -APACHE), NOTICE (Apache's)
// and PATENTS (Go's and golang.org/x's grant).
var licenceName = regexp.MustCompile(`(?i)^(licen[cs]e|copying|unlicen[cs]e|notice|patents)([-._].*)?$`)

// moduleLicences lists the licence files at the top of dir, sorted.
func moduleLicences(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && licenceName.MatchString(e.Name()) && !strings.HasSuffix(e.Name(), ".go") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// writeNotices writes the third-party notices of program: the list of
// what it links (Go's standard library and runtime, and mods), then the
// full text of each one's licence files. A module without any licence
// file is an error naming it, and so is an unreadable one: an incomplete
// notice is not written.
func writeNotices(w io.Writer, program, goVersion, goroot string, mods []module) error {
	type part struct {
		name, dir string
		files     []string
	}
	parts := []part{{name: "Go standard library and runtime " + goVersion, dir: goroot, files: []string{"LICENSE", "PATENTS"}}}
	var errs []error
	for _, m := range mods {
		names, err := moduleLicences(m.dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("module %s: %w", m, err))
			continue
		}
		if len(names) == 0 {
			errs = append(errs, fmt.Errorf("module %s: no licence file (LICENSE, COPYING, NOTICE…) at the top of its module directory", m))
			continue
		}
		parts = append(parts, part{name: "module " + m.String(), dir: m.dir, files: names})
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the notices of %s: %w", program, err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Third-party software in %s\n\n", program)
	fmt.Fprintf(&b, "%s is RunOS's (see LICENSE). It is built with Go and links the\n"+
		"components below, each under its own licence, whose full text follows.\n\n", program)
	for _, p := range parts {
		fmt.Fprintf(&b, "  %s\n", p.name)
	}
	rule := strings.Repeat("=", 72)
	for _, p := range parts {
		for _, f := range p.files {
			text, err := os.ReadFile(filepath.Join(p.dir, f))
			if err != nil {
				return fmt.Errorf("the notices of %s: %s: %w", program, p.name, err)
			}
			fmt.Fprintf(&b, "\n%s\n%s: %s\n%s\n\n%s", rule, p.name, f, rule, text)
			if !bytes.HasSuffix(text, []byte("\n")) {
				b.WriteByte('\n')
			}
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// goroot is the Go toolchain's directory as the repository's go sees it
// (its LICENSE and PATENTS are the standard library's).
func goroot(root string) (string, error) {
	cmd := exec.Command("go", "env", "GOROOT")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
