//go:build linux

// Package apptest runs the real runos-desktop binary on Linux (it is not
// named e2e so that `make test` runs it with the unit half): a private
// session D-Bus (Debian's dbus-daemon), a minimal StatusNotifierWatcher
// written here with godbus standing in for the tray host, and a daemon
// speaking the real local API on a temp socket. The menu is read the way a
// tray reads it (com.canonical.dbusmenu GetLayout) and clicked the way a
// tray clicks it (Event "clicked").
package apptest

import (
	"bufio"
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"

	"github.com/runos/vpn/desktop/icons"
	"github.com/runos/vpn/desktop/menu"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/syncbuf"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/runos-desktop once per test run, as shipped for Linux
// (CGO_ENABLED=0).
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "runos-desktop-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "runos-desktop")
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = "/usr/local/go/bin/go"
		}
		cmd := exec.Command(gobin, "build", "-o", binPath, "github.com/runos/vpn/cmd/runos-desktop")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	if labBin != "" {
		os.RemoveAll(labBin)
	}
	os.Exit(code)
}

// bus is a private session bus.
type bus struct {
	addr string
}

// startBus runs `dbus-daemon --session` on a socket in a temp dir and
// stops it (by PID) when the test ends. env is added to the environment
// of the services the bus starts on demand (xfconfd for the panel).
func startBus(t testing.TB, env ...string) *bus {
	t.Helper()
	netnstest.Require(t, "dbus-daemon")
	dir := shortTemp(t)
	cmd := exec.Command("dbus-daemon", "--session", "--nofork", "--print-address=1", "--address=unix:path="+filepath.Join(dir, "bus"))
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon: %v", err)
	}
	return &bus{addr: strings.TrimSpace(line)}
}

// shortTemp is a temp dir with a short path: unix sockets allow ~100 bytes.
func shortTemp(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "rde")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func (b *bus) conn(t testing.TB) *dbus.Conn {
	t.Helper()
	c, err := dbus.Connect(b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// registration is one RegisterStatusNotifierItem call.
type registration struct {
	Sender  string // the caller's unique name
	Service string // what it registered: an object path or a bus name
}

// watcher is the tray host's side of the StatusNotifierItem protocol, as
// little of it as an item needs: it takes the well-known name and records
// registrations.
type watcher struct {
	mu    sync.Mutex
	regs  []registration
	added chan registration
}

func (w *watcher) RegisterStatusNotifierItem(service string, sender dbus.Sender) *dbus.Error {
	r := registration{Sender: string(sender), Service: service}
	w.mu.Lock()
	w.regs = append(w.regs, r)
	w.mu.Unlock()
	w.added <- r
	return nil
}

func (w *watcher) RegisterStatusNotifierHost(string) *dbus.Error { return nil }

func startWatcher(t testing.TB, b *bus) *watcher {
	t.Helper()
	c := b.conn(t)
	w := &watcher{added: make(chan registration, 16)}
	const path, iface = "/StatusNotifierWatcher", "org.kde.StatusNotifierWatcher"
	if err := c.Export(w, path, iface); err != nil {
		t.Fatal(err)
	}
	_, err := prop.Export(c, path, prop.Map{iface: {
		"RegisteredStatusNotifierItems":  {Value: []string{}, Emit: prop.EmitTrue},
		"IsStatusNotifierHostRegistered": {Value: true, Emit: prop.EmitTrue},
		"ProtocolVersion":                {Value: int32(0), Emit: prop.EmitTrue},
	}})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := c.RequestName(iface, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("take %s: %v %v", iface, reply, err)
	}
	return w
}

// next waits for the next registration.
func (w *watcher) next(t testing.TB) registration {
	t.Helper()
	select {
	case r := <-w.added:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no StatusNotifierItem registered")
	}
	return registration{}
}

// proc is a running runos-desktop.
type proc struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
}

// startApp runs the binary with env and stops it by PID when the test ends.
func startApp(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	return startCmd(t, cmd)
}

// startCmd starts a prepared runos-desktop command (e.g. inside a lab
// laptop) and stops it by PID when the test ends.
func startCmd(t testing.TB, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("runos-desktop output:\n%s", p.out.String())
		}
	})
	return p
}

// node is one menu item as dbusmenu describes it.
type node struct {
	ID       int32
	Label    string
	Enabled  bool
	Visible  bool
	Toggle   string // "checkmark" for a checkable row
	Checked  bool
	Children []node
}

// menuReader reads an item's menu over D-Bus like a tray does.
type menuReader struct {
	t       testing.TB
	obj     dbus.BusObject
	updates chan *dbus.Signal
}

func readMenu(t testing.TB, c *dbus.Conn, r registration) *menuReader {
	t.Helper()
	item := c.Object(r.Sender, dbus.ObjectPath(r.Service))
	v, err := item.GetProperty("org.kde.StatusNotifierItem.Menu")
	if err != nil {
		t.Fatalf("the item's Menu property: %v", err)
	}
	path := v.Value().(dbus.ObjectPath)
	if err := c.AddMatchSignal(dbus.WithMatchSender(r.Sender), dbus.WithMatchInterface("com.canonical.dbusmenu")); err != nil {
		t.Fatal(err)
	}
	m := &menuReader{t: t, obj: c.Object(r.Sender, path), updates: make(chan *dbus.Signal, 256)}
	c.Signal(m.updates)
	return m
}

type layout struct {
	ID       int32
	Props    map[string]dbus.Variant
	Children []dbus.Variant
}

func toNode(l layout) node {
	n := node{ID: l.ID, Enabled: true, Visible: true}
	if v, ok := l.Props["label"]; ok {
		n.Label, _ = v.Value().(string)
	}
	if v, ok := l.Props["enabled"]; ok {
		n.Enabled, _ = v.Value().(bool)
	}
	if v, ok := l.Props["visible"]; ok {
		n.Visible, _ = v.Value().(bool)
	}
	if v, ok := l.Props["toggle-type"]; ok {
		n.Toggle, _ = v.Value().(string)
	}
	if v, ok := l.Props["toggle-state"]; ok {
		s, _ := v.Value().(int32)
		n.Checked = s == 1
	}
	if v, ok := l.Props["type"]; ok && v.Value() == "separator" {
		n.Label = "----"
	}
	for _, c := range l.Children {
		var cl layout
		if err := dbus.Store([]any{c.Value()}, &cl); err == nil {
			n.Children = append(n.Children, toNode(cl))
		}
	}
	return n
}

// layout is GetLayout(0, -1, []): the whole menu.
func (m *menuReader) layout() []node {
	m.t.Helper()
	var rev uint32
	var l layout
	if err := m.obj.Call("com.canonical.dbusmenu.GetLayout", 0, int32(0), int32(-1), []string{}).Store(&rev, &l); err != nil {
		m.t.Fatalf("GetLayout: %v", err)
	}
	return toNode(l).Children
}

// visible is what a user sees, top to bottom.
func visible(items []node) []node {
	var out []node
	for _, n := range items {
		if n.Visible {
			out = append(out, n)
		}
	}
	return out
}

func labels(items []node) []string {
	var out []string
	for _, n := range items {
		out = append(out, n.Label)
	}
	return out
}

// until re-reads the menu on every dbusmenu signal until ok holds.
func (m *menuReader) until(what string, ok func([]node) bool) []node {
	m.t.Helper()
	return m.untilFor(what, 30*time.Second, ok)
}

// untilFor is until with its own bound, for a wait that includes a known
// delay (a sign-in that lapses) on top of the menu's reaction.
func (m *menuReader) untilFor(what string, bound time.Duration, ok func([]node) bool) []node {
	m.t.Helper()
	deadline := time.After(bound)
	for {
		items := visible(m.layout())
		if ok(items) {
			return items
		}
		select {
		case <-m.updates:
		case <-time.After(500 * time.Millisecond): // a signal may have come before the match
		case <-deadline:
			m.t.Fatalf("menu never had %s; it shows %q", what, labels(items))
		}
	}
}

func (m *menuReader) click(n node) {
	m.t.Helper()
	if err := m.obj.Call("com.canonical.dbusmenu.Event", 0, n.ID, "clicked", dbus.MakeVariant(""), uint32(0)).Err; err != nil {
		m.t.Fatalf("click %q: %v", n.Label, err)
	}
}

func find(items []node, label string) (node, bool) {
	i := slices.IndexFunc(items, func(n node) bool { return n.Label == label })
	if i < 0 {
		return node{}, false
	}
	return items[i], true
}

func has(label string) func([]node) bool {
	return func(items []node) bool { _, ok := find(items, label); return ok }
}

func hasPrefix(prefix string) func([]node) bool {
	return func(items []node) bool {
		return slices.ContainsFunc(items, func(n node) bool { return strings.HasPrefix(n.Label, prefix) })
	}
}

func all(preds ...func([]node) bool) func([]node) bool {
	return func(items []node) bool {
		for _, p := range preds {
			if !p(items) {
				return false
			}
		}
		return true
	}
}

func checked(label string, want bool) func([]node) bool {
	return func(items []node) bool { n, ok := find(items, label); return ok && n.Checked == want }
}

// notice is one desktop notification.
type notice struct{ App, Summary, Body string }

// notifications is a minimal org.freedesktop.Notifications server.
type notifications struct{ got chan notice }

func (n *notifications) Notify(app string, replaces uint32, icon, summary, body string, actions []string,
	hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	n.got <- notice{App: app, Summary: summary, Body: body}
	return 1, nil
}

func startNotifications(t *testing.T, b *bus) *notifications {
	t.Helper()
	c := b.conn(t)
	n := &notifications{got: make(chan notice, 8)}
	if err := c.Export(n, "/org/freedesktop/Notifications", "org.freedesktop.Notifications"); err != nil {
		t.Fatal(err)
	}
	if reply, err := c.RequestName("org.freedesktop.Notifications", dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("take org.freedesktop.Notifications: %v %v", reply, err)
	}
	return n
}

// pixmap is one StatusNotifierItem IconPixmap entry: ARGB32, network order.
type pixmap struct {
	W, H int32
	Pix  []byte
}

// argbOf converts a PNG as the StatusNotifierItem spec says: straight
// (not premultiplied) ARGB32.
func argbOf(t *testing.T, b []byte) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	bnd := img.Bounds()
	argb := make([]byte, 0, bnd.Dx()*bnd.Dy()*4)
	for y := bnd.Min.Y; y < bnd.Max.Y; y++ {
		for x := bnd.Min.X; x < bnd.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			if c.A == 0 {
				c = color.NRGBA{}
			}
			argb = append(argb, c.A, c.R, c.G, c.B)
		}
	}
	return argb
}

// iconIs waits until the item's IconPixmap is icon.
func iconIs(t *testing.T, c *dbus.Conn, r registration, icon menu.Icon) {
	t.Helper()
	argb := argbOf(t, icons.PNG(icon))
	item := c.Object(r.Sender, dbus.ObjectPath(r.Service))
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := item.GetProperty("org.kde.StatusNotifierItem.IconPixmap")
		var px []pixmap
		if err == nil && dbus.Store([]any{v.Value()}, &px) == nil && len(px) == 1 && bytes.Equal(px[0].Pix, argb) {
			return
		}
		if time.Now().After(deadline) {
			sig := ""
			if err == nil {
				sig = v.Signature().String()
			}
			shown := "unknown"
			for _, i := range menu.Icons() {
				if len(px) == 1 && bytes.Equal(px[0].Pix, argbOf(t, icons.PNG(i))) {
					shown = i.String()
				}
			}
			t.Fatalf("the tray icon is %s, want %s (err %v, signature %s)", shown, icon, err, sig)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
