package auth

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
)

// startBus runs a private D-Bus session bus for the test and points
// DBUS_SESSION_BUS_ADDRESS at it.
func startBus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=`+sock+`</listen>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>`), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, nil, "dbus-daemon", "--config-file="+conf, "--nofork", "--nopidfile")
	waitFor(t, "the session bus socket", func() bool { _, err := os.Stat(sock); return err == nil })
	addr := "unix:path=" + sock
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", addr)
	return dir
}

// startProcess runs a helper until the test ends, then kills it by PID.
func startProcess(t *testing.T, configure func(*exec.Cmd), name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	// Killed with the test binary even if it dies without cleaning up
	// (a timeout's panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if configure != nil {
		configure(cmd)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for range 300 {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

// A session bus with no Secret Service on it: go-keyring is really asked,
// really fails, and the secret lands in the file.
func TestOpenKeystoreBusWithoutSecretService(t *testing.T) {
	netnstest.Require(t, "dbus-daemon")
	startBus(t)
	path := filepath.Join(t.TempDir(), "credentials.json")
	k := OpenKeystore("runos-test", path)
	if k.ring == nil {
		t.Fatal("the bus was not seen")
	}
	if !checkRoundTrip(t, k) {
		t.Fatal("the secret was not in the fallback file")
	}
}

// A real keychain: GNOME Keyring's Secret Service on a private bus with an
// unlocked login keyring. The secret goes there and not into the file.
func TestOpenKeystoreGnomeKeyring(t *testing.T) {
	netnstest.Require(t, "dbus-daemon", "gnome-keyring-daemon")
	dir := startBus(t)
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	startProcess(t, func(c *exec.Cmd) {
		c.Stdin = strings.NewReader("login-keyring-password")
		c.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_RUNTIME_DIR="+dir)
	}, "gnome-keyring-daemon", "--unlock", "--components=secrets", "--foreground")
	k := OpenKeystore("runos-test", filepath.Join(t.TempDir(), "credentials.json"))
	waitFor(t, "GNOME Keyring on the bus", func() bool {
		_, err := osRing{}.Get("runos-test", "probe")
		return errors.Is(err, ErrNotFound)
	})
	if checkRoundTrip(t, k) {
		t.Fatal("the secret went to the file although GNOME Keyring runs")
	}
	if _, err := os.Stat(k.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("fallback file exists: %v", err)
	}
	// Set, then read it back straight from the keychain.
	if err := k.Set("operator", "in-the-keychain"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Delete("operator") })
	if s, err := (osRing{}).Get("runos-test", "operator"); err != nil || s != "in-the-keychain" {
		t.Fatalf("keychain has %q, %v", s, err)
	}
}
