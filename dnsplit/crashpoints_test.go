package dnsplit

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// TestResolverFileCrashPoints: a resolver file change recorded but not yet
// written, written by rename, or left as a temporary file before its rename
// is undone by Cleanup, and undoing twice is the same as once.
func TestResolverFileCrashPoints(t *testing.T) {
	opt := testOptions(t)
	j, _ := openJournal(opt.StateDir)
	path := filepath.Join(opt.ResolverDir, "ky3.rjwrn.example.com")
	ours := resolverFile("ky3", "100.100.1.1")
	_ = os.MkdirAll(opt.ResolverDir, 0o755)
	undo := map[string]undoer{kindResolverFile: removeResolverFile}
	for _, state := range []string{"recorded only", "written", "temporary file left"} {
		if err := j.record(change{Kind: kindResolverFile, Path: path, Written: ours}); err != nil {
			t.Fatal(err)
		}
		switch state {
		case "written":
			_ = os.WriteFile(path, ours, 0o644)
		case "temporary file left":
			_ = os.WriteFile(filepath.Join(opt.ResolverDir, ".ky3.rjwrn.example.com.tmp123"), ours, 0o644)
		}
		for i := 0; i < 2; i++ {
			if err := cleanup(opt.StateDir, slog.New(slog.DiscardHandler), undo); err != nil {
				t.Fatalf("%s: cleanup %d: %v", state, i, err)
			}
		}
		if ents, _ := os.ReadDir(opt.ResolverDir); len(ents) != 0 {
			t.Errorf("%s: left %v", state, ents)
		}
		if cs, _ := j.load(); len(cs) != 0 {
			t.Errorf("%s: still recorded %+v", state, cs)
		}
	}
	// A user's file under that name, written while we were down, stays.
	_ = j.record(change{Kind: kindResolverFile, Path: path, Written: ours})
	_ = os.WriteFile(path, []byte("nameserver 192.168.1.1\n"), 0o644)
	if err := cleanup(opt.StateDir, slog.New(slog.DiscardHandler), undo); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "nameserver 192.168.1.1\n" {
		t.Errorf("the user's file: %q", b)
	}
}

// TestNRPTCrashPoints: a rule recorded before its key is written, or
// written in part, is deleted by the undo, which is harmless twice.
func TestNRPTCrashPoints(t *testing.T) {
	opt := testOptions(t)
	j, _ := openJournal(opt.StateDir)
	reg := &fakeRegistry{keys: map[string][]RegistryValue{}}
	m := newNRPTMode(opt, j, reg, "test")
	if err := m.Set(context.Background(), []Route{{CID: "ky3", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"ky3.rjwrn.example.com"}}}); err != nil {
		t.Fatal(err)
	}
	// The daemon dies here: the key is written and recorded. Cleanup on
	// this OS's registry deletes exactly the recorded key, twice is fine.
	undo := map[string]undoer{kindNRPTRule: func(c change) error { return reg.DeleteKey(c.Key) }}
	reg.keys["RunOS-xym"] = []RegistryValue{{Name: "Version", Type: RegDWord, DWord: 2}} // recorded, written in part
	_ = j.record(change{Kind: kindNRPTRule, Key: "RunOS-xym"})
	reg.keys["{someone-elses-rule}"] = nil
	for i := 0; i < 2; i++ {
		if err := cleanup(opt.StateDir, slog.New(slog.DiscardHandler), undo); err != nil {
			t.Fatal(err)
		}
	}
	if keys, _ := reg.Keys(); len(keys) != 1 || keys[0] != "{someone-elses-rule}" {
		t.Errorf("keys left %v", keys)
	}
	if cs, _ := j.load(); len(cs) != 0 {
		t.Errorf("still recorded %+v", cs)
	}
}
