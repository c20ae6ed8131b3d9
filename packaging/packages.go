package main

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
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
	root string // the repository (README.md, LICENSE if there is one)
	tmp  string // where the maintainer scripts are written for nfpm to read
}

// file is one entry of a package: src is relative to inputs, dst absolute.
type file struct {
	src, dst string
	mode     os.FileMode
	typ      string // files.TypeConfigNoReplace for the configuration, "" for a plain file
	packager string // "" both; "deb" or "rpm" where the two distributions differ
}

// pkg is one package: runos (the CLI and the daemon it installs on
// request), runos-control or runos-gateway.
type pkg struct {
	name, description string
	files             []file
	scripts           nfpm.Scripts
}

// packages lists the three packages. Nothing in them starts a service:
// `sudo runos vpn install` stays the one step that starts the VPN daemon,
// and control and the gateway wait until their configuration is filled in
// and the administrator enables them.
func packages(in inputs) ([]pkg, error) {
	runos := pkg{
		name: "runos",
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
		p := pkg{name: "runos-" + s.name, description: s.description, files: []file{
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
		all[i].files = append(all[i].files, docFiles(in, all[i].name)...)
	}
	return all, nil
}

// docFiles: the README, and the licence when the repository has one.
func docFiles(in inputs, name string) []file {
	f := []file{{src: filepath.Join(in.root, "README.md"), dst: "/usr/share/doc/" + name + "/README.md", mode: 0o644}}
	for _, l := range []string{"LICENSE", "LICENSE.md", "COPYING"} {
		if _, err := os.Stat(filepath.Join(in.root, l)); err == nil {
			f = append(f, file{src: filepath.Join(in.root, l), dst: "/usr/share/doc/" + name + "/copyright", mode: 0o644})
			break
		}
	}
	return f
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
