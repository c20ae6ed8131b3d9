//go:build linux

package apptest

import (
	"bufio"
	"bytes"
	"flag"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/runos/vpn/desktop/internal/fakevpnd"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/syncbuf"
	"github.com/runos/vpn/internal/testenv"
	"github.com/runos/vpn/vpnd/localapi"
)

var screenshot = flag.String("screenshot", "", "write a PNG of the menu open in a real tray (xfce4-panel under Xvfb) to this path")

// panelConfig is one top panel: a spacer, the status tray (which hosts
// StatusNotifierItems) and a clock.
const panelConfig = `<?xml version="1.0" encoding="UTF-8"?>
<channel name="xfce4-panel" version="1.0">
  <property name="configver" type="int" value="2"/>
  <property name="panels" type="array">
    <value type="int" value="1"/>
    <property name="panel-1" type="empty">
      <property name="position" type="string" value="p=6;x=0;y=0"/>
      <property name="length" type="uint" value="100"/>
      <property name="position-locked" type="bool" value="true"/>
      <property name="icon-size" type="uint" value="20"/>
      <property name="size" type="uint" value="30"/>
      <property name="plugin-ids" type="array">
        <value type="int" value="1"/>
        <value type="int" value="2"/>
        <value type="int" value="3"/>
      </property>
    </property>
  </property>
  <property name="plugins" type="empty">
    <property name="plugin-1" type="string" value="separator">
      <property name="expand" type="bool" value="true"/>
      <property name="style" type="uint" value="0"/>
    </property>
    <property name="plugin-2" type="string" value="systray">
      <property name="square-icons" type="bool" value="true"/>
    </property>
    <property name="plugin-3" type="string" value="clock"/>
  </property>
</channel>
`

const panelHeight = 30

// TestScreenshot makes docs/desktop-menu.png (desktop/screenshot.sh runs
// it): RunOS Desktop in xfce4-panel's tray on Xvfb, its menu opened with a
// real mouse click.
func TestScreenshot(t *testing.T) {
	testenv.OnlyWhenAsked(t, *screenshot != "", "set -screenshot=PATH (desktop/screenshot.sh) to make the screenshot")
	netnstest.Require(t, "Xvfb", "xfce4-panel", "xdotool", "import", "dbus-daemon")
	dir := shortTemp(t)
	xdg := filepath.Join(dir, "config")
	chan_ := filepath.Join(xdg, "xfce4", "xfconf", "xfce-perchannel-xml")
	if err := os.MkdirAll(chan_, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chan_, "xfce4-panel.xml"), []byte(panelConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	display := startXvfb(t)
	desk := []string{"DISPLAY=" + display, "HOME=" + dir, "XDG_CONFIG_HOME=" + xdg}
	b := startBus(t, desk...)
	env := append(os.Environ(), desk...)
	env = append(env, "DBUS_SESSION_BUS_ADDRESS="+b.addr)
	startGroup(t, env, "xfce4-panel", "--disable-wm-check")
	waitName(t, b.conn(t), "org.kde.StatusNotifierWatcher")

	ky3 := cluster("ky3", true, localapi.ClusterConnected)
	ky3.PeerUp, ky3.Server = true, localapi.Server{NodeID: "n1", Endpoint: "10.77.0.21:32768"}
	st := signedIn(ky3, cluster("xym", false, localapi.ClusterDisconnected))
	st.Session.ExpiresAt = time.Now().Add(23*time.Hour + 40*time.Minute)
	d, err := fakevpnd.Start(filepath.Join(dir, "vpnd.sock"), st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	appEnv := append(env, "RUNOS_VPND_SOCKET="+d.Socket, "XDG_RUNTIME_DIR="+run, "RUNOS_CONFIG="+filepath.Join(dir, "none.json"), "BROWSER=true")
	startApp(t, appEnv)

	// Find the icon in the panel (the connected icon is green), click it,
	// and wait for the menu to be drawn below the panel.
	var x, y int
	var last image.Image
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			keep := filepath.Join(os.TempDir(), "runos-desktop-screenshot-failed.png")
			var buf bytes.Buffer
			_ = png.Encode(&buf, last)
			_ = os.WriteFile(keep, buf.Bytes(), 0o644)
			t.Logf("the screen at the failure: %s", keep)
		}
	})
	seen := func() bool {
		last = grab(t, display)
		x, y = findIcon(last)
		return x >= 0
	}
	for try := 0; !within(15*time.Second, seen); try++ {
		// The tray may have missed the registration while it started; a
		// second launch makes the app register again (and is itself a
		// check of "show yourself").
		if try == 3 {
			t.Fatal("no icon in the tray")
		}
		t.Log("no icon yet; launching again so the app re-registers")
		again := exec.Command(binary(t))
		again.Env = appEnv
		if out, err := again.CombinedOutput(); err != nil {
			t.Fatalf("second launch: %v: %s", err, out)
		}
	}
	xdotool(t, display, "mousemove", strconv.Itoa(x), strconv.Itoa(y), "click", "1")
	var box image.Rectangle
	waitFor(t, "the open menu", func() bool {
		last = grab(t, display)
		box = menuBox(last)
		return box.Dx() > 150 && box.Dy() > 100
	})
	time.Sleep(500 * time.Millisecond) // let the menu finish drawing
	img := grab(t, display)
	box = menuBox(img)
	crop := image.Rect(box.Min.X-24, 0, img.Bounds().Max.X, box.Max.Y+12).Intersect(img.Bounds())
	out := image.NewRGBA(image.Rect(0, 0, crop.Dx(), crop.Dy()))
	for py := crop.Min.Y; py < crop.Max.Y; py++ {
		for px := crop.Min.X; px < crop.Max.X; px++ {
			out.Set(px-crop.Min.X, py-crop.Min.Y, img.At(px, py))
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, out); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*screenshot, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%dx%d)", *screenshot, crop.Dx(), crop.Dy())
}

// startXvfb starts a virtual X server on a free display (-displayfd).
func startXvfb(t *testing.T) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1024x640x24", "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// SIGTERM, not SIGKILL: Xvfb then removes its lock file and socket,
	// which would otherwise get in the next run's way.
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	line, err := bufio.NewReader(r).ReadString('\n')
	r.Close()
	n, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		t.Fatalf("Xvfb gave no display (%q): %v", line, err)
	}
	return ":" + strconv.Itoa(n)
}

// startGroup runs a program in its own process group and kills the group
// when the test ends (the panel runs its plugins as child processes).
func startGroup(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
}

func waitName(t *testing.T, c *dbus.Conn, name string) {
	t.Helper()
	waitFor(t, name+" on the bus", func() bool {
		var owner string
		return c.BusObject().Call("org.freedesktop.DBus.GetNameOwner", 0, name).Store(&owner) == nil
	})
}

// within checks ok every 100ms for up to d.
func within(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// waitFor checks ok every 100ms; it fails the test after a generous
// deadline instead of hanging.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grab(t *testing.T, display string) image.Image {
	t.Helper()
	cmd := exec.Command("import", "-display", display, "-window", "root", "png:-")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func xdotool(t *testing.T, display string, args ...string) {
	t.Helper()
	cmd := exec.Command("xdotool", args...)
	cmd.Env = append(os.Environ(), "DISPLAY="+display)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("xdotool %v: %v: %s", args, err, out)
	}
}

// findIcon returns the centre of the green (connected) icon in the panel,
// or -1, -1.
func findIcon(img image.Image) (int, int) {
	minX, maxX, minY, maxY := 1<<30, -1, 1<<30, -1
	b := img.Bounds()
	for y := b.Min.Y; y < panelHeight; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if g>>8 > 0x80 && r>>8 < 0x70 && bl>>8 < 0x80 {
				minX, maxX, minY, maxY = min(minX, x), max(maxX, x), min(minY, y), max(maxY, y)
			}
		}
	}
	if maxX < 0 {
		return -1, -1
	}
	return (minX + maxX) / 2, (minY + maxY) / 2
}

// menuBox is the bounding box of what is drawn below the panel on the
// black root window: the open menu.
func menuBox(img image.Image) image.Rectangle {
	b := img.Bounds()
	box := image.Rectangle{}
	for y := panelHeight + 1; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r|g|bl > 0x1000 {
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return box
}
