// Command packaging builds RunOS's .deb and .rpm packages with nfpm used
// as a library: runos (the CLI and the VPN daemon it installs on request,
// with its man pages and shell completions generated from its command
// tree), runos-control and runos-gateway (each with a systemd unit, a
// system user and its configuration under /etc/runos/). Each carries
// LICENSE and the third-party notices of the modules its program links
// (notices.go). make packages runs it over make cross's Linux builds.
//
// It is a module of its own so that nfpm and what it needs stay out of
// the go.mod of the programs RunOS ships.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

func main() {
	var (
		bin     = flag.String("bin", "../bin/cross", "make cross's output: linux-<arch>/ with runos, runos-control and runos-gateway")
		root    = flag.String("root", "..", "the repository (README.md, LICENSE)")
		out     = flag.String("out", "../dist", "where the packages go")
		version = flag.String("version", "dev", "the version (git describe)")
		arches  = flag.String("arch", "amd64,arm64", "architectures, comma-separated")
		formats = flag.String("format", "deb,rpm", "package formats, comma-separated")
		mtime   = flag.Int64("mtime", 0, "the files' time in the packages, seconds since 1970 (SOURCE_DATE; default now)")
	)
	flag.Parse()
	t := time.Now().UTC()
	if *mtime != 0 {
		t = time.Unix(*mtime, 0).UTC()
	}
	made, err := build(config{bin: *bin, root: *root, out: *out, version: *version, mtime: t,
		arches: strings.Split(*arches, ","), formats: strings.Split(*formats, ",")})
	for _, m := range made {
		fmt.Println("packages:", m)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "packaging:", err)
		os.Exit(1)
	}
}

type config struct {
	bin, root, out, version string
	mtime                   time.Time
	arches, formats         []string
}

// build writes every package of every architecture and format into
// c.out and returns their paths.
func build(c config) ([]string, error) {
	tmp, err := os.MkdirTemp("", "runos-packaging-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	docs := filepath.Join(tmp, "docs")
	if err := writeDocs(docs, c.mtime); err != nil {
		return nil, err
	}
	if err := writeAssets(tmp); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return nil, err
	}
	var made []string
	for _, arch := range c.arches {
		in := inputs{bin: filepath.Join(c.bin, "linux-"+arch), docs: docs, root: c.root, tmp: tmp}
		pkgs, err := packages(in)
		if err != nil {
			return made, err
		}
		for _, p := range pkgs {
			for _, format := range c.formats {
				path, err := write(p, format, arch, c)
				if err != nil {
					return made, fmt.Errorf("%s %s %s: %w", p.name, format, arch, err)
				}
				made = append(made, path)
			}
		}
	}
	return made, nil
}

// write builds one package file.
func write(p pkg, format, arch string, c config) (string, error) {
	packager, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	// Proprietary: LICENSE reserves all rights; the licences of the modules
	// the program links are in its notices (licenceFiles).
	info := nfpm.WithDefaults(&nfpm.Info{
		Name: p.name, Arch: arch, Platform: "linux", Version: debVersion(c.version), VersionSchema: "none",
		Maintainer: "RunOS <vpn@runos.com>", Vendor: "RunOS", Homepage: "https://runos.com",
		License: "Proprietary", Description: p.description, Section: "net", Priority: "optional", MTime: c.mtime,
		Overridables: nfpm.Overridables{Contents: contents(p, c.mtime), Scripts: p.scripts,
			RPM: nfpm.RPM{Summary: strings.SplitN(p.description, "\n", 2)[0], Group: "Applications/Internet",
				BuildHost: "runos-packaging"}}, // not this machine's name: two builds of one commit match
	})
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", err
	}
	path := filepath.Join(c.out, packager.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := packager.Package(info, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", err
	}
	return path, f.Close()
}

func contents(p pkg, mtime time.Time) files.Contents {
	var cs files.Contents
	for _, f := range p.files {
		cs = append(cs, &files.Content{Source: f.src, Destination: f.dst, Type: f.typ, Packager: f.packager,
			FileInfo: &files.ContentFileInfo{Mode: f.mode, MTime: mtime, Owner: "root", Group: "root"}})
	}
	return cs
}

// debVersion turns git describe's output into a version both dpkg and
// rpm order correctly: v1.2.3 is 1.2.3, v1.2.3-4-gabcdef is 1.2.3+4.gabcdef
// (after 1.2.3), and a bare commit (no tag yet) is 0.0.0+git.<commit>.
func debVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	if !strings.Contains(v, ".") { // a commit (its hex may start with a digit)
		return "0.0.0+git." + strings.ReplaceAll(v, "-", ".")
	}
	if base, rest, ok := strings.Cut(v, "-"); ok {
		if _, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0]); err == nil {
			return base + "+" + strings.ReplaceAll(rest, "-", ".")
		}
		return base + "~" + strings.ReplaceAll(rest, "-", ".") // v1.2.3-rc1: before 1.2.3
	}
	return v
}
