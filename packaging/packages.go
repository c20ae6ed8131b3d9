package main

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/files"
)

//go:embed scripts etc
var assets embed.FS

// inputs are where a package's files come from.
type inputs struct {
	bin  string // the linux-<arch> directory of make cross's output, holding the programs
	docs string // writeDocs's output
	root string // the repository (README.md, LICENSE)
	tmp  string // where the maintainer scripts are written for nfpm to read
}

// file is one entry of a package: src is relative to inputs, dst absolute.
type file struct {
	src, dst string
	mode     os.FileMode
	typ      string // files.TypeConfigNoReplace for the configuration, files.TypeRPMLicense or TypeRPMDoc (rpm), "" for a plain file
	packager string // "" both; "deb" or "rpm" where the two distributions differ
}

// pkg is one package: runos (the CLI and the daemon it installs on
// request), runos-control or runos-gateway.
type pkg struct {
	name, description string
	program           string // the program it ships, whose linked modules its notices list
	files             []file
	scripts           nfpm.Scripts
}

// packages lists the three packages. Nothing in them starts a service:
// `sudo runos vpn install` stays the one step that starts the VPN daemon,
// and control and the gateway wait until their configuration is filled in
// and the administrator enables them.
func packages(in inputs) ([]pkg, error) {
	runos := pkg{
		name: "runos", program: filepath.Join(in.bin, "runos"),
		description: "RunOS command line and VPN daemon\n" +
			"runos reaches your RunOS clusters over the user-access VPN (runos vpn up) and\n" +
			"manages the clusters' VPN servers. sudo runos vpn install starts the daemon.",
		files: []file{
			{src: filepath.Join(in.bin, "runos"), dst: "/usr/bin/runos", mode: 0o755},
			{src: filepath.Join(in.docs, "completions", "runos.bash"), dst: "/usr/share/bash-completion/completions/runos", mode: 0o644},
			{src: filepath.Join(in.docs, "completions", "_runos"), dst: "/usr/share/zsh/vendor-completions/_runos", mode: 0o644, packager: "deb"},
			{src: filepath.Join(in.docs, "completions", "_runos"), dst: "/usr/share/zsh/site-functions/_runos", mode: 0o644, packager: "rpm"},
			{src: filepath.Join(in.docs, "completions", "runos.fish"), dst: "/usr/share/fish/vendor_completions.d/runos.fish", mode: 0o644},
		},
	}
	pages, err := filepath.Glob(filepath.Join(in.docs, "man", "*.1.gz"))
	if err != nil || len(pages) == 0 {
		return nil, fmt.Errorf("no man pages in %s (%v)", in.docs, err)
	}
	for _, p := range pages {
		runos.files = append(runos.files, file{src: p, dst: "/usr/share/man/man1/" + filepath.Base(p), mode: 0o644})
	}
	if runos.scripts, err = scripts(in, "runos", "runos.prerm", "runos.postrm", ""); err != nil {
		return nil, err
	}
	all := []pkg{runos}
	for _, s := range []struct{ name, description string }{
		{"control", "RunOS control: accounts, clusters, devices and the VPN's sessions\n" +
			"The server side of RunOS VPN. Configure /etc/runos/control.env, then\n" +
			"systemctl enable --now runos-control."},
		{"gateway", "RunOS gateway: a node's part of its cluster's VPN\n" +
			"Runs on every node of a cluster. Put the node's token in /etc/runos/gateway-token,\n" +
			"configure /etc/runos/gateway.env, then systemctl enable --now runos-gateway."},
	} {
		p := pkg{name: "runos-" + s.name, description: s.description, program: filepath.Join(in.bin, "runos-"+s.name), files: []file{
			{src: filepath.Join(in.bin, "runos-"+s.name), dst: "/usr/bin/runos-" + s.name, mode: 0o755},
			{src: filepath.Join(in.tmp, "etc", "runos-"+s.name+".service"), dst: "/lib/systemd/system/runos-" + s.name + ".service", mode: 0o644, packager: "deb"},
			{src: filepath.Join(in.tmp, "etc", "runos-"+s.name+".service"), dst: "/usr/lib/systemd/system/runos-" + s.name + ".service", mode: 0o644, packager: "rpm"},
			{src: filepath.Join(in.tmp, "etc", s.name+".env"), dst: "/etc/runos/" + s.name + ".env", mode: 0o640, typ: files.TypeConfigNoReplace},
		}}
		if p.scripts, err = scripts(in, s.name, "server.prerm", "server.postrm", "server.postinst"); err != nil {
			return nil, err
		}
		all = append(all, p)
	}
	for i := range all {
		lic, err := licenceFiles(in, all[i])
		if err != nil {
			return nil, err
		}
		all[i].files = append(all[i].files, docFiles(in, all[i].name)...)
		all[i].files = append(all[i].files, lic...)
	}
	return all, nil
}

// docFiles: the README, in /usr/share/doc/<package>/ (marked %doc in the rpm).
func docFiles(in inputs, name string) []file {
	src, dst := filepath.Join(in.root, "README.md"), "/usr/share/doc/"+name+"/README.md"
	return []file{{src: src, dst: dst, mode: 0o644, packager: "deb"}, {src: src, dst: dst, mode: 0o644, typ: files.TypeRPMDoc, packager: "rpm"}}
}

// licenceFiles writes the package's third-party notices (from the modules
// its program links) and lists where the licence goes, as each
// distribution wants it: Debian's one /usr/share/doc/<package>/copyright
// (LICENSE, then the notices), and Fedora's /usr/share/licenses/<package>/
// with LICENSE and THIRD_PARTY_NOTICES (marked %license in the rpm).
func licenceFiles(in inputs, p pkg) ([]file, error) {
	licence := filepath.Join(in.root, "LICENSE")
	own, err := os.ReadFile(licence)
	if err != nil {
		return nil, fmt.Errorf("the licence of %s: %w", p.name, err)
	}
	goVersion, mods, err := linkedModules(p.program)
	if err != nil {
		return nil, err
	}
	if err := locate(in.root, mods); err != nil {
		return nil, fmt.Errorf("the modules %s links: %w", p.program, err)
	}
	gr, err := goroot(in.root)
	if err != nil {
		return nil, err
	}
	var notices bytes.Buffer
	if err := writeNotices(&notices, filepath.Base(p.program), goVersion, gr, mods); err != nil {
		return nil, err
	}
	dir := filepath.Join(in.tmp, "licences", filepath.Base(in.bin), p.name) // one per architecture: what links may differ
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	noticesPath, copyright := filepath.Join(dir, "THIRD_PARTY_NOTICES"), filepath.Join(dir, "copyright")
	if err := os.WriteFile(noticesPath, notices.Bytes(), 0o644); err != nil {
		return nil, err
	}
	sep := "\n" + strings.Repeat("-", 72) + "\n\n"
	if err := os.WriteFile(copyright, slices.Concat(own, []byte(sep), notices.Bytes()), 0o644); err != nil {
		return nil, err
	}
	return []file{
		{src: copyright, dst: "/usr/share/doc/" + p.name + "/copyright", mode: 0o644, packager: "deb"},
		{src: licence, dst: "/usr/share/licenses/" + p.name + "/LICENSE", mode: 0o644, typ: files.TypeRPMLicense, packager: "rpm"},
		{src: noticesPath, dst: "/usr/share/licenses/" + p.name + "/THIRD_PARTY_NOTICES", mode: 0o644, typ: files.TypeRPMLicense, packager: "rpm"},
	}, nil
}

// scripts writes the embedded maintainer scripts (with @NAME@ filled in)
// where nfpm reads them.
func scripts(in inputs, name, prerm, postrm, postinst string) (nfpm.Scripts, error) {
	var s nfpm.Scripts
	for _, x := range []struct {
		src string
		dst *string
	}{{prerm, &s.PreRemove}, {postrm, &s.PostRemove}, {postinst, &s.PostInstall}} {
		if x.src == "" {
			continue
		}
		b, err := assets.ReadFile("scripts/" + x.src)
		if err != nil {
			return s, err
		}
		p := filepath.Join(in.tmp, name+"-"+x.src)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "@NAME@", name)), 0o755); err != nil {
			return s, err
		}
		*x.dst = p
	}
	return s, nil
}

// writeAssets gives the embedded files (units, configuration) to nfpm as
// files on disk.
func writeAssets(tmp string) error {
	ents, err := assets.ReadDir("etc")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(tmp, "etc"), 0o755); err != nil {
		return err
	}
	for _, e := range ents {
		b, err := assets.ReadFile("etc/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, "etc", e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
