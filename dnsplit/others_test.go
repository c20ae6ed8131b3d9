package dnsplit

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNormalizeRoutes(t *testing.T) {
	got, err := normalizeRoutes([]Route{
		{CID: "ky3", Server: netip.MustParseAddr("::ffff:100.100.1.1"), Domains: []string{"~Ky3.RJWRN.example.com.", ".x.example"}},
		{CID: "nod", Server: netip.MustParseAddr("100.100.9.1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Server.String() != "100.100.1.1" || !slices.Equal(got[0].Domains, []string{"ky3.rjwrn.example.com", "x.example"}) {
		t.Errorf("normalized: %+v", got)
	}
	for _, bad := range []Route{
		{CID: "a", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"../../etc/passwd"}},
		{CID: "b", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"a b.example"}},
		{CID: "c", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{""}},
		{CID: "d", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"-x.example"}},
		{CID: "e", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{strings.Repeat("a", 64) + ".example"}},
		{CID: "f", Domains: []string{"ok.example"}},
		{CID: "g", Server: netip.MustParseAddr("0.0.0.0"), Domains: []string{"ok.example"}},
	} {
		if _, err := normalizeRoutes([]Route{bad}); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

func testOptions(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	opt := Options{Interface: "wg1", StateDir: filepath.Join(dir, "state"), ResolverDir: filepath.Join(dir, "resolver"),
		Logger: slog.New(slog.DiscardHandler)}
	if err := opt.fill(); err != nil {
		t.Fatal(err)
	}
	return opt
}

func TestResolverFilesMode(t *testing.T) {
	opt := testOptions(t)
	j, _ := openJournal(opt.StateDir)
	m := newResolverFilesMode(opt, j, "test")
	// The user's own resolver file for another domain is never touched.
	if err := os.MkdirAll(opt.ResolverDir, 0o755); err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(opt.ResolverDir, "home.arpa")
	if err := os.WriteFile(users, []byte("nameserver 192.168.1.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Set(context.Background(), twoClusters); err != nil {
		t.Fatal(err)
	}
	files := func() map[string]string {
		out := map[string]string{}
		es, _ := os.ReadDir(opt.ResolverDir)
		for _, e := range es {
			b, _ := os.ReadFile(filepath.Join(opt.ResolverDir, e.Name()))
			out[e.Name()] = string(b)
		}
		return out
	}
	got := files()
	want := map[string]string{
		"home.arpa":             "nameserver 192.168.1.1\n",
		"ky3.rjwrn.example.com": resolverMarker + "ky3.\nnameserver 100.100.1.1\n",
		"custom.example":        resolverMarker + "ky3.\nnameserver 100.100.1.1\n",
		"xym.rjwrn.example.com": resolverMarker + "xym.\nnameserver 100.100.2.1\n",
	}
	if !maps.Equal(got, want) {
		t.Errorf("files:\n%v\nwant\n%v", got, want)
	}
	if cs, _ := j.load(); len(cs) != 3 {
		t.Errorf("journal records %d files, want 3", len(cs))
	}
	fi, _ := os.Stat(filepath.Join(opt.ResolverDir, "xym.rjwrn.example.com"))
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}

	// Disconnecting xym removes only its file.
	if err := m.Set(context.Background(), twoClusters[:1]); err != nil {
		t.Fatal(err)
	}
	if _, ok := files()["xym.rjwrn.example.com"]; ok {
		t.Error("xym's file left after it disconnected")
	}
	// A user file under a cluster's name is refused, not overwritten.
	if err := os.WriteFile(filepath.Join(opt.ResolverDir, "xym.rjwrn.example.com"), []byte("nameserver 8.8.8.8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Set(context.Background(), twoClusters); err == nil || !strings.Contains(err.Error(), "not written by runos") {
		t.Errorf("overwrote or silently skipped a user's file: %v", err)
	}
	if m.Status().Error == "" {
		t.Error("status does not report the conflict")
	}
	if err := os.Remove(filepath.Join(opt.ResolverDir, "xym.rjwrn.example.com")); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := files(); !maps.Equal(got, map[string]string{"home.arpa": "nameserver 192.168.1.1\n"}) {
		t.Errorf("after Close: %v", got)
	}
	if _, err := os.Stat(filepath.Join(opt.StateDir, journalFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Error("journal left")
	}
}

// fakeRegistry is an in-memory DnsPolicyConfig.
type fakeRegistry struct {
	keys    map[string][]RegistryValue
	flushes int
	failSet bool
}

func (r *fakeRegistry) Keys() ([]string, error) { return slices.Sorted(maps.Keys(r.keys)), nil }
func (r *fakeRegistry) SetKey(name string, v []RegistryValue) error {
	if r.failSet {
		r.keys[name] = v[:1] // a half-written key, as a failing write leaves
		return errors.New("access is denied")
	}
	r.keys[name] = slices.Clone(v)
	return nil
}
func (r *fakeRegistry) DeleteKey(name string) error { delete(r.keys, name); return nil }
func (r *fakeRegistry) Flush() error                { r.flushes++; return nil }

func TestNRPTMode(t *testing.T) {
	opt := testOptions(t)
	j, _ := openJournal(opt.StateDir)
	reg := &fakeRegistry{keys: map[string][]RegistryValue{"{someone-elses-rule}": nil}}
	m := newNRPTMode(opt, j, reg, "test")
	if err := m.Set(context.Background(), twoClusters); err != nil {
		t.Fatal(err)
	}
	if got, _ := reg.Keys(); !slices.Equal(got, []string{"RunOS-ky3", "RunOS-xym", "{someone-elses-rule}"}) {
		t.Errorf("keys %v", got)
	}
	byName := map[string]RegistryValue{}
	for _, v := range reg.keys["RunOS-ky3"] {
		byName[v.Name] = v
	}
	if v := byName["Name"]; v.Type != RegMultiStr || !slices.Equal(v.Strings, []string{".ky3.rjwrn.example.com", "ky3.rjwrn.example.com", ".custom.example", "custom.example"}) {
		t.Errorf("Name = %+v", v)
	}
	if v := byName["GenericDNSServers"]; v.Type != RegString || !slices.Equal(v.Strings, []string{"100.100.1.1"}) {
		t.Errorf("GenericDNSServers = %+v", v)
	}
	if v := byName["ConfigOptions"]; v.Type != RegDWord || v.DWord != 8 {
		t.Errorf("ConfigOptions = %+v", v)
	}
	if v := byName["Version"]; v.Type != RegDWord || v.DWord != 2 {
		t.Errorf("Version = %+v", v)
	}
	if reg.flushes != 1 {
		t.Errorf("flushes = %d", reg.flushes)
	}
	// Same routes again: nothing written, nothing flushed.
	if err := m.Set(context.Background(), twoClusters); err != nil || reg.flushes != 1 {
		t.Errorf("idempotent Set: %v, flushes %d", err, reg.flushes)
	}
	if cs, _ := j.load(); len(cs) != 2 {
		t.Errorf("journal %+v", cs)
	}

	// A crash now: Cleanup removes exactly the recorded keys.
	if err := cleanup(opt.StateDir, opt.Logger, map[string]undoer{kindNRPTRule: func(c change) error { return reg.DeleteKey(c.Key) }}); err != nil {
		t.Fatal(err)
	}
	if got, _ := reg.Keys(); !slices.Equal(got, []string{"{someone-elses-rule}"}) {
		t.Errorf("after cleanup: %v", got)
	}

	// A failing write leaves no half-written key and no record.
	m = newNRPTMode(opt, j, reg, "test")
	reg.failSet = true
	if err := m.Set(context.Background(), twoClusters[:1]); err == nil {
		t.Fatal("failing registry accepted")
	}
	if got, _ := reg.Keys(); len(got) != 1 {
		t.Errorf("half-written key left: %v", got)
	}
	if cs, _ := j.load(); len(cs) != 0 {
		t.Errorf("journal %+v", cs)
	}
}

func TestCleanupUndoesWhatIsRecorded(t *testing.T) {
	opt := testOptions(t)
	j, _ := openJournal(opt.StateDir)
	rc := filepath.Join(t.TempDir(), "resolv.conf")
	orig := []byte("nameserver 10.77.0.53\n")
	if err := os.WriteFile(rc, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	snap, _ := snapshotResolvConf(rc)
	snap.Written = renderResolvConf(orig, DefaultListenAddr.Addr(), j.path)
	rf := filepath.Join(opt.ResolverDir, "ky3.rjwrn.example.com")
	_ = os.MkdirAll(opt.ResolverDir, 0o755)
	for _, c := range []change{snap, {Kind: kindResolverFile, Path: rf, Written: resolverFile("ky3", "100.100.1.1")}, {Kind: kindNRPTRule, Key: "RunOS-ky3"}} {
		if err := j.record(c); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.WriteFile(rc, snap.Written, 0o644)
	_ = os.WriteFile(rf, resolverFile("ky3", "100.100.1.1"), 0o644)
	fi, _ := os.Stat(j.path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", fi.Mode().Perm())
	}

	// This OS cannot undo the NRPT rule: it stays recorded, the rest is undone.
	err := cleanup(opt.StateDir, opt.Logger, map[string]undoer{
		kindResolvConf:   func(c change) error { _, err := restoreResolvConf(c); return err },
		kindResolverFile: removeResolverFile,
	})
	if err == nil || !strings.Contains(err.Error(), "nrpt-rule") {
		t.Errorf("cleanup error = %v, want the NRPT rule reported", err)
	}
	if got, _ := os.ReadFile(rc); string(got) != string(orig) {
		t.Errorf("resolv.conf %q", got)
	}
	if _, err := os.Stat(rf); !errors.Is(err, fs.ErrNotExist) {
		t.Error("resolver file left")
	}
	if cs, _ := j.load(); len(cs) != 1 || cs[0].Kind != kindNRPTRule {
		t.Errorf("left recorded: %+v", cs)
	}
	// Nothing recorded: a no-op.
	if err := Cleanup(t.TempDir(), nil); err != nil {
		t.Errorf("Cleanup of an empty dir: %v", err)
	}
	// A damaged journal is reported, not guessed at.
	_ = os.WriteFile(j.path, []byte("{not json"), 0o600)
	if err := Cleanup(opt.StateDir, nil); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged journal: %v", err)
	}
}

func FuzzJournal(f *testing.F) {
	f.Add([]byte(`{"version":1,"changes":[{"kind":"resolv.conf","path":"/etc/resolv.conf","original":"bmFtZXNlcnZlciAxMC43Ny4wLjUzCg=="}]}`))
	f.Add([]byte(`{"changes":[{"kind":"nrpt-rule","key":"RunOS-ky3"},{"kind":"zzz"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, journalFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		var undone []string
		_ = cleanup(dir, slog.New(slog.DiscardHandler), map[string]undoer{
			kindNRPTRule: func(c change) error { undone = append(undone, c.Key); return nil },
		})
	})
}

func TestNewPicksAMode(t *testing.T) {
	opt := testOptions(t)
	opt.Mode = ModeOff
	c, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(context.Background(), twoClusters); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(); st.Mode != ModeOff || st.Reason == "" || st.Error != "" {
		t.Errorf("off: %+v", st)
	}
	opt.Mode = "bogus"
	if _, err := New(opt); err == nil {
		t.Error("bogus mode accepted")
	}
	if _, err := New(Options{}); err == nil {
		t.Error("no state directory accepted")
	}
}
