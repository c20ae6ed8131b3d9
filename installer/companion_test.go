package installer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// windowsWorld is newWorld on a Windows of temporary directories: Install
// needs wintun.dll beside runos, and the OS would find one in system32.
func windowsWorld(t *testing.T) (w *world, system32 string) {
	w = newWorld(t)
	system32 = filepath.Join(w.root, "Windows", "System32")
	os.MkdirAll(system32, 0o755)
	w.o.host.companions = []companion{wintunCompanion("amd64", system32)}
	return w, system32
}

func TestInstallCopiesWintun(t *testing.T) {
	w, _ := windowsWorld(t)
	beside := filepath.Join(filepath.Dir(w.src), "wintun.dll")
	os.WriteFile(beside, []byte("wintun 0.14.1"), 0o644)
	var progress strings.Builder
	w.o.Progress = &progress
	if _, err := Install(context.Background(), w.o); err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(filepath.Dir(w.o.Binary), "wintun.dll")
	if got := readFile(t, installed); got != "wintun 0.14.1" {
		t.Errorf("installed wintun.dll holds %q", got)
	}
	if !strings.Contains(progress.String(), "Installing "+installed) {
		t.Errorf("progress does not tell the copy:\n%s", progress.String())
	}

	// An upgrade brings the DLL beside the new runos, and leaves no
	// previous copy behind.
	os.WriteFile(beside, []byte("wintun 0.15"), 0o644)
	w.setSource(t, "v2")
	if _, err := Install(context.Background(), w.o); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, installed); got != "wintun 0.15" {
		t.Errorf("upgraded wintun.dll holds %q", got)
	}
	if _, err := os.Stat(installed + ".previous"); err == nil {
		t.Error("the previous wintun.dll was left behind")
	}

	// A new runos without a DLL beside it keeps the installed one.
	os.Remove(beside)
	w.setSource(t, "v3")
	if _, err := Install(context.Background(), w.o); err != nil {
		t.Fatalf("upgrade without a DLL beside the new runos: %v", err)
	}
	if got := readFile(t, installed); got != "wintun 0.15" {
		t.Errorf("kept wintun.dll holds %q", got)
	}
}

func TestInstallWintunRolledBack(t *testing.T) {
	w, _ := windowsWorld(t)
	os.WriteFile(filepath.Join(filepath.Dir(w.src), "wintun.dll"), []byte("wintun"), 0o644)
	w.m.fail["start"] = errors.New("the service did not start")
	if _, err := Install(context.Background(), w.o); err == nil {
		t.Fatal("install with a failing start succeeded")
	}
	for _, p := range []string{w.o.Binary, filepath.Join(filepath.Dir(w.o.Binary), "wintun.dll")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind by a failed install", p)
		}
	}
}

func TestInstallRefusedWithoutWintun(t *testing.T) {
	w, _ := windowsWorld(t)
	_, err := Install(context.Background(), w.o)
	if err == nil {
		t.Fatal("installed without wintun.dll")
	}
	for _, says := range []string{
		"wintun.dll is missing (not in " + filepath.Dir(w.src),
		"https://www.wintun.net",
		`wintun\bin\amd64\wintun.dll next to runos.exe`,
		"run this again",
	} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the refusal %q does not say %q", err, says)
		}
	}
	// Refused before anything changed.
	for _, p := range []string{w.o.Binary, w.o.StateDir} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists after the refusal", p)
		}
	}
	if len(w.m.calls) != 0 {
		t.Errorf("service calls %v", w.m.calls)
	}
}

func TestInstallWintunInSystem32(t *testing.T) {
	w, system32 := windowsWorld(t)
	os.WriteFile(filepath.Join(system32, "wintun.dll"), []byte("wintun"), 0o644)
	if _, err := Install(context.Background(), w.o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(w.o.Binary), "wintun.dll")); err == nil {
		t.Error("copied a DLL the OS finds in system32")
	}
}

func TestPlanCompanions(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "RunOS", "runos.exe")
	os.MkdirAll(filepath.Dir(src), 0o755)
	os.WriteFile(filepath.Join(dir, "RunOS", "wintun.dll"), nil, 0o644)
	c := []companion{wintunCompanion("arm64", "")}
	// Running from the install folder: the DLL "copies" onto itself, which
	// placeBinary turns into nothing.
	plan, err := planCompanions(c, src, src)
	if err != nil || len(plan) != 1 || plan[0].from != plan[0].to {
		t.Errorf("from the install folder: %v %v", plan, err)
	}
	if p, err := placeBinary(plan[0].from, plan[0].to); err != nil || p.changed {
		t.Errorf("placing a file onto itself: %+v %v", p, err)
	}
	if plan, err := planCompanions(nil, src, "/elsewhere/runos"); plan != nil || err != nil {
		t.Errorf("no companions (Linux, macOS): %v %v", plan, err)
	}
	if _, err := planCompanions(c, filepath.Join(dir, "x", "runos.exe"), filepath.Join(dir, "y", "runos.exe")); err == nil ||
		!strings.Contains(err.Error(), `wintun\bin\arm64\wintun.dll`) {
		t.Errorf("arm64: %v", err)
	}
}

func TestWintunCompanion(t *testing.T) {
	c := wintunCompanion("386", `C:\Windows\System32`)
	if c.Name != "wintun.dll" || len(c.Elsewhere) != 1 || c.Elsewhere[0] != `C:\Windows\System32` || !strings.Contains(c.Get, `wintun\bin\x86\wintun.dll`) {
		t.Errorf("386: %+v", c)
	}
	if c := wintunCompanion("amd64", ""); c.Elsewhere != nil {
		t.Errorf("no system32 known: %+v", c)
	}
}
