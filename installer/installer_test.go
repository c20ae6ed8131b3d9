package installer

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/vpnd"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
)

// fakeMachine is a service manager and a daemon: Start runs "the daemon"
// from the installed binary, whose content stands for its version.
type fakeMachine struct {
	t         *testing.T
	binary    string
	installed bool
	running   string // the running daemon's version, "" when stopped
	noAnswer  map[string]bool
	fail      map[string]error
	calls     []string
	cleanups  []vpnd.Config
	foreign   bool // a daemon the service did not start answers
}

func (f *fakeMachine) call(c string) error {
	f.calls = append(f.calls, c)
	return f.fail[c]
}

func (f *fakeMachine) Platform() string   { return PlatformSysV }
func (f *fakeMachine) Definition() string { return "/etc/init.d/runos-vpnd-test" }
func (f *fakeMachine) Installed() (bool, error) {
	return f.installed, nil
}
func (f *fakeMachine) Install() error {
	if err := f.call("install"); err != nil {
		return err
	}
	f.installed = true
	return nil
}
func (f *fakeMachine) Uninstall() error {
	if err := f.call("uninstall"); err != nil {
		return err
	}
	f.installed = false
	return nil
}
func (f *fakeMachine) Start() error {
	if err := f.call("start"); err != nil {
		return err
	}
	b, err := os.ReadFile(f.binary)
	if err != nil {
		f.t.Errorf("start without a binary: %v", err)
	}
	f.running = string(b)
	return nil
}
func (f *fakeMachine) Stop() error {
	f.running = ""
	return f.call("stop")
}

func (f *fakeMachine) version(context.Context, string) (*localapi.Version, error) {
	if f.foreign {
		return &localapi.Version{Version: "hand-run"}, nil
	}
	if f.running == "" || f.noAnswer[f.running] {
		return nil, errors.New("daemon not reachable")
	}
	return &localapi.Version{Version: f.running, Commit: version.Commit}, nil
}

type world struct {
	m    *fakeMachine
	o    Options
	src  string // the running program
	root string
}

func newWorld(t *testing.T) *world {
	root := t.TempDir()
	w := &world{root: root, src: filepath.Join(root, "build", "runos")}
	os.MkdirAll(filepath.Dir(w.src), 0o755)
	w.setSource(t, version.Version)
	bin := filepath.Join(root, "usr", "local", "bin", "runos")
	w.m = &fakeMachine{t: t, binary: bin, noAnswer: map[string]bool{}, fail: map[string]error{}}
	env := map[string]string{"SUDO_USER": "alice"}
	w.o = Options{
		Name: "runos-vpnd-test", Binary: bin,
		StateDir: filepath.Join(root, "var", "lib", "runos"),
		Socket:   filepath.Join(root, "run", "runos", "vpnd.sock"),
		LogFile:  filepath.Join(root, "var", "log", "runos-vpnd-test.log"),
		Getenv:   func(k string) string { return env[k] },
		host: &host{
			admin:      func() bool { return true },
			executable: func() (string, error) { return w.src, nil },
			invoking:   invokingUser,
			lookupUser: func(name string) (access.Operator, error) {
				uid, ok := map[string]int{"alice": 1000, "bob": 1001}[name]
				if !ok {
					return access.Operator{}, errors.New("no such user on this machine")
				}
				return access.Operator{UID: uid, User: name}, nil
			},
			manager: func(Spec) (manager, error) { return w.m, nil },
			version: w.m.version,
			cleanup: func(_ context.Context, cfg vpnd.Config) error {
				w.m.cleanups = append(w.m.cleanups, cfg)
				return nil
			},
			rwPaths: func() []string { return nil },
			poll:    1,
		},
		StartTimeout: 50e6, // 50 ms: the fake answers at once or never
	}
	return w
}

// setSource makes the running program "version v".
func (w *world) setSource(t *testing.T, v string) {
	if err := os.WriteFile(w.src, []byte(v), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (w *world) takeCalls() []string { c := w.m.calls; w.m.calls = nil; return c }

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInstallFresh(t *testing.T) {
	w := newWorld(t)
	ca := filepath.Join(w.root, "ca.pem")
	os.WriteFile(ca, []byte("PEM"), 0o644)
	w.o.CAFile = ca
	var progress strings.Builder
	w.o.Progress = &progress
	res, err := Install(context.Background(), w.o)
	if err != nil {
		t.Fatal(err)
	}
	if c := w.takeCalls(); !slices.Equal(c, []string{"install", "start"}) {
		t.Errorf("calls %v", c)
	}
	if got := readFile(t, w.o.Binary); got != version.Version {
		t.Errorf("installed binary holds %q", got)
	}
	if fi, _ := os.Stat(w.o.Binary); fi.Mode().Perm() != 0o755 {
		t.Errorf("binary mode %v", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(w.o.StateDir); !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v", fi.Mode().Perm())
	}
	op, err := access.ReadOperator(w.o.StateDir)
	if err != nil || op == nil || *op != (access.Operator{UID: 1000, User: "alice"}) {
		t.Errorf("operator %+v %v", op, err)
	}
	if got := readFile(t, filepath.Join(w.o.StateDir, CAFileName)); got != "PEM" {
		t.Errorf("CA copy %q", got)
	}
	want := Result{Service: "runos-vpnd-test", Platform: PlatformSysV, Definition: "/etc/init.d/runos-vpnd-test",
		Binary: w.o.Binary, StateDir: w.o.StateDir, Socket: w.o.Socket, Operator: "alice", Version: version.Version,
		Log: w.o.LogFile}
	if !reflect.DeepEqual(*res, want) {
		t.Errorf("result\n %+v\nwant\n %+v", *res, want)
	}
	for _, line := range []string{"Installing " + w.o.Binary, "Registering the service runos-vpnd-test (unix-systemv)", "Starting it"} {
		if !strings.Contains(progress.String(), line) {
			t.Errorf("progress lacks %q:\n%s", line, progress.String())
		}
	}
	// The spec the service gets trusts the copied CA.
	if s := w.o.spec(); s.CAFile != filepath.Join(w.o.StateDir, CAFileName) {
		t.Errorf("spec CA %q", s.CAFile)
	}
}

func TestInstallUpgradeInPlace(t *testing.T) {
	w := newWorld(t)
	if _, err := Install(context.Background(), w.o); err != nil {
		t.Fatal(err)
	}
	w.takeCalls()
	w.setSource(t, "v2")
	w.m.noAnswer[version.Version] = false
	env := map[string]string{} // root itself, no sudo: the operator stays
	w.o.Getenv = func(k string) string { return env[k] }
	res, err := Install(context.Background(), w.o)
	if err != nil {
		t.Fatal(err)
	}
	if c := w.takeCalls(); !slices.Equal(c, []string{"stop", "uninstall", "install", "start"}) {
		t.Errorf("calls %v", c)
	}
	if !res.Upgraded || res.Version != "v2" || res.Operator != "alice" || w.m.running != "v2" {
		t.Errorf("result %+v running %q", res, w.m.running)
	}
	if _, err := os.Stat(w.o.Binary + ".previous"); err == nil {
		t.Error("the previous binary was left behind")
	}
	// --operator replaces the operator.
	w.o.Operator = "bob"
	if _, err := Install(context.Background(), w.o); err != nil {
		t.Fatal(err)
	}
	if op, _ := access.ReadOperator(w.o.StateDir); op == nil || op.User != "bob" || op.UID != 1001 {
		t.Errorf("operator %+v", op)
	}
}

func TestInstallRefusals(t *testing.T) {
	w := newWorld(t)
	w.o.host.admin = func() bool { return false }
	_, err := Install(context.Background(), w.o)
	var na NotAdminError
	if !errors.As(err, &na) || err.Error() != "run it with sudo: sudo runos vpn install" {
		t.Errorf("not root: %v", err)
	}
	if _, err := Uninstall(context.Background(), w.o); err == nil || err.Error() != "run it with sudo: sudo runos vpn uninstall" {
		t.Errorf("uninstall not root: %v", err)
	}

	w = newWorld(t)
	w.o.Operator = "mallory"
	if _, err := Install(context.Background(), w.o); err == nil || !strings.Contains(err.Error(), "operator mallory: no such user on this machine: give an existing user with --operator USER") {
		t.Errorf("unknown operator: %v", err)
	}
	w.o.Operator = ""
	w.o.CAFile = filepath.Join(w.root, "missing.pem")
	if _, err := Install(context.Background(), w.o); err == nil || !strings.Contains(err.Error(), "--ca-file") {
		t.Errorf("missing CA: %v", err)
	}
	w.o.CAFile = ""
	w.m.foreign = true
	if _, err := Install(context.Background(), w.o); err == nil || !strings.Contains(err.Error(), "did not start (version hand-run) answers on") {
		t.Errorf("foreign daemon: %v", err)
	}
	// Nothing of the refused attempts touched the machine.
	for _, p := range []string{w.o.Binary, w.o.StateDir} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists after refusals", p)
		}
	}
	if len(w.m.calls) != 0 {
		t.Errorf("calls %v", w.m.calls)
	}
}

func TestInstallFailureLeavesNothing(t *testing.T) {
	w := newWorld(t)
	w.m.noAnswer[version.Version] = true // the daemon never answers
	_, err := Install(context.Background(), w.o)
	if err == nil || !strings.Contains(err.Error(), "did not answer on "+w.o.Socket) || !strings.Contains(err.Error(), "see "+w.o.LogFile) {
		t.Fatalf("err = %v", err)
	}
	if c := w.takeCalls(); !slices.Equal(c, []string{"install", "start", "stop", "uninstall"}) {
		t.Errorf("calls %v", c)
	}
	for _, p := range []string{w.o.Binary, w.o.StateDir} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after a failed install", p)
		}
	}
	if w.m.installed || w.m.running != "" {
		t.Errorf("service left: installed %v running %q", w.m.installed, w.m.running)
	}

	// Registering fails: nothing registered, nothing left either.
	w = newWorld(t)
	w.m.fail["install"] = errors.New("Init already exists")
	if _, err := Install(context.Background(), w.o); err == nil || !strings.Contains(err.Error(), "register runos-vpnd-test with unix-systemv: Init already exists") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(w.o.Binary); err == nil {
		t.Error("binary left")
	}
}

func TestUpgradeFailureRestoresThePrevious(t *testing.T) {
	w := newWorld(t)
	if _, err := Install(context.Background(), w.o); err != nil {
		t.Fatal(err)
	}
	w.takeCalls()
	w.setSource(t, "v2-broken")
	w.m.noAnswer["v2-broken"] = true
	if _, err := Install(context.Background(), w.o); err == nil {
		t.Fatal("a broken upgrade succeeded")
	}
	if c := w.takeCalls(); !slices.Equal(c, []string{"stop", "uninstall", "install", "start", "stop", "uninstall", "install", "start"}) {
		t.Errorf("calls %v", c)
	}
	if got := readFile(t, w.o.Binary); got != version.Version {
		t.Errorf("binary after the failed upgrade: %q", got)
	}
	if !w.m.installed || w.m.running != version.Version {
		t.Errorf("the previous version is not back: installed %v running %q", w.m.installed, w.m.running)
	}
	if op, _ := access.ReadOperator(w.o.StateDir); op == nil || op.User != "alice" {
		t.Errorf("operator %+v", op)
	}
}

func TestUninstall(t *testing.T) {
	w := newWorld(t)
	if _, err := Install(context.Background(), w.o); err != nil {
		t.Fatal(err)
	}
	w.takeCalls()
	key := filepath.Join(w.o.StateDir, "device.key")
	os.WriteFile(key, []byte("secret"), 0o600)
	// A socket file a killed daemon left behind.
	l, err := net.Listen("unix", w.o.Socket)
	if err != nil {
		os.MkdirAll(filepath.Dir(w.o.Socket), 0o755)
		if l, err = net.Listen("unix", w.o.Socket); err != nil {
			t.Fatal(err)
		}
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	res, err := Uninstall(context.Background(), w.o)
	if err != nil {
		t.Fatal(err)
	}
	if c := w.takeCalls(); !slices.Equal(c, []string{"stop", "uninstall"}) {
		t.Errorf("calls %v", c)
	}
	if !res.Removed || res.Purged || res.DeviceKey != key {
		t.Errorf("result %+v", res)
	}
	if len(w.m.cleanups) != 1 || w.m.cleanups[0].Cleanup == nil || w.m.cleanups[0].StateDir != w.o.StateDir || w.m.cleanups[0].Socket != w.o.Socket {
		t.Errorf("clean-up %+v", w.m.cleanups)
	}
	if readFile(t, key) != "secret" {
		t.Error("device key changed")
	}
	if _, err := os.Stat(filepath.Dir(w.o.Socket)); err == nil {
		t.Error("socket (or its directory) left behind")
	}

	// Again: nothing installed, still safe; --purge takes the key too.
	w.o.Purge = true
	res, err = Uninstall(context.Background(), w.o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed || !res.Purged || res.DeviceKey != "" {
		t.Errorf("result %+v", res)
	}
	if c := w.takeCalls(); len(c) != 0 {
		t.Errorf("calls %v", c)
	}
	if _, err := os.Stat(w.o.StateDir); err == nil {
		t.Error("state dir left after --purge")
	}
	// With nothing left at all, uninstall creates nothing.
	if _, err := Uninstall(context.Background(), w.o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.o.StateDir); err == nil {
		t.Error("uninstall created the state dir")
	}
	if len(w.m.cleanups) != 2 {
		t.Errorf("clean-ups %d, want 2 (none without a state dir)", len(w.m.cleanups))
	}

	w.m.foreign = true
	if _, err := Uninstall(context.Background(), w.o); err == nil || !strings.Contains(err.Error(), "still answers") {
		t.Errorf("foreign daemon: %v", err)
	}
}

// --allowed-routes and --allowed-dns-domains reach the daemon's command,
// are recorded, and an upgrade without them keeps them.
func TestInstallTrust(t *testing.T) {
	w := newWorld(t)
	trust := Trust{AllowedRoutes: []string{"10.99.0.0/16", "10.100.0.0/16"}, AllowedDNSDomains: []string{"corp.example"}}
	w.o.Trust = trust
	res, err := Install(context.Background(), w.o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Trust, trust) {
		t.Errorf("result trust %+v", res.Trust)
	}
	wantArgs := "--allowed-routes 10.99.0.0/16,10.100.0.0/16 --allowed-dns-domains corp.example"
	if got := strings.Join(w.o.spec().DaemonArgs(), " "); !strings.Contains(got, wantArgs) {
		t.Errorf("daemon args %q lack %q", got, wantArgs)
	}
	w.o.Trust = Trust{}
	res, err = Install(context.Background(), w.o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Upgraded || !reflect.DeepEqual(res.Trust, trust) {
		t.Errorf("upgrade without the flags: upgraded %v trust %+v", res.Upgraded, res.Trust)
	}
	// A failed install leaves no record behind.
	w2 := newWorld(t)
	w2.o.Trust = trust
	w2.m.fail["start"] = errors.New("no")
	if _, err := Install(context.Background(), w2.o); err == nil {
		t.Fatal("install succeeded")
	}
	if _, err := os.Stat(filepath.Join(w2.o.StateDir, TrustFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("trust record after a failed install: %v", err)
	}
}
