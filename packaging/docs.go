package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/runos/vpn/cli"
)

// writeDocs generates, from runos's own command tree, what the runos
// package ships besides the program: a man page per command (gzipped, as
// Debian's policy wants them) and the bash, zsh and fish completions.
// runos help stays the one source: nothing here is written by hand.
func writeDocs(dir string, date time.Time) error {
	root := cli.Command()
	root.DisableAutoGenTag = true // the date is the header's, fixed below
	man := filepath.Join(dir, "man")
	if err := os.MkdirAll(man, 0o755); err != nil {
		return err
	}
	header := &doc.GenManHeader{Title: "RUNOS", Section: "1", Source: "RunOS", Manual: "RunOS VPN", Date: &date}
	if err := doc.GenManTree(root, header, man); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	if err := gzipAll(man); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	comp := filepath.Join(dir, "completions")
	if err := os.MkdirAll(comp, 0o755); err != nil {
		return err
	}
	for name, gen := range map[string]func(*cobra.Command, *bytes.Buffer) error{
		"runos.bash": func(c *cobra.Command, b *bytes.Buffer) error { return c.GenBashCompletionV2(b, true) },
		"_runos":     func(c *cobra.Command, b *bytes.Buffer) error { return c.GenZshCompletion(b) },
		"runos.fish": func(c *cobra.Command, b *bytes.Buffer) error { return c.GenFishCompletion(b, true) },
	} {
		var b bytes.Buffer
		if err := gen(root, &b); err != nil {
			return fmt.Errorf("completion %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(comp, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// gzipAll replaces every file in dir by its gzip, with no name or time in
// the header so that two builds of one commit are the same bytes.
func gzipAll(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
		if _, err := zw.Write(b); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		if err := os.WriteFile(p+".gz", out.Bytes(), 0o644); err != nil {
			return err
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return nil
}
