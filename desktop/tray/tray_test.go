package tray

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/desktop/menu"
	"github.com/runos/vpn/vpnd/localapi"
)

// fakeBackend records every call the tray makes to systray.
type fakeBackend struct {
	mu    sync.Mutex
	calls []string
	items []*fakeItem
}

type fakeItem struct {
	b         *fakeBackend
	n         int
	checkable bool
	title     string
	enabled   bool
	checked   bool
	visible   bool
	clicked   chan struct{}
}

func (b *fakeBackend) log(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, fmt.Sprintf(format, args...))
}

func (b *fakeBackend) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.calls
	b.calls = nil
	return c
}

func (b *fakeBackend) AddItem(checkable bool) item {
	b.mu.Lock()
	it := &fakeItem{b: b, n: len(b.items), checkable: checkable, enabled: true, visible: true, clicked: make(chan struct{})}
	b.items = append(b.items, it)
	b.mu.Unlock()
	b.log("add %d", it.n)
	return it
}

func (b *fakeBackend) AddSeparator() { b.log("separator") }

func (b *fakeBackend) Reset() {
	b.mu.Lock()
	for _, it := range b.items {
		close(it.clicked)
	}
	b.items = nil
	b.mu.Unlock()
	b.log("reset")
}

func (b *fakeBackend) SetIcon(template, regular []byte) { b.log("icon") }
func (b *fakeBackend) SetTooltip(s string)              { b.log("tooltip %s", s) }

func (i *fakeItem) SetTitle(s string)        { i.title = s; i.b.log("%d title %s", i.n, s) }
func (i *fakeItem) SetTooltip(s string)      { i.b.log("%d tooltip %s", i.n, s) }
func (i *fakeItem) Enable()                  { i.enabled = true; i.b.log("%d enable", i.n) }
func (i *fakeItem) Disable()                 { i.enabled = false; i.b.log("%d disable", i.n) }
func (i *fakeItem) Check()                   { i.checked = true; i.b.log("%d check", i.n) }
func (i *fakeItem) Uncheck()                 { i.checked = false; i.b.log("%d uncheck", i.n) }
func (i *fakeItem) Show()                    { i.visible = true; i.b.log("%d show", i.n) }
func (i *fakeItem) Hide()                    { i.visible = false; i.b.log("%d hide", i.n) }
func (i *fakeItem) Clicked() <-chan struct{} { return i.clicked }

// visibleTitles is the menu as a user sees it.
func (b *fakeBackend) visibleTitles() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, it := range b.items {
		if it.visible {
			out = append(out, it.title)
		}
	}
	return out
}

func (b *fakeBackend) itemTitled(title string) *fakeItem {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range b.items {
		if it.visible && it.title == title {
			return it
		}
	}
	return nil
}

func menuWith(cids ...string) menu.Menu {
	st := &localapi.Status{Seq: 1, Session: localapi.Session{State: localapi.SessionSignedIn, User: "ana@example.com"}}
	for _, c := range cids {
		st.Clusters = append(st.Clusters, localapi.ClusterStatus{CID: c, State: localapi.ClusterDisconnected})
	}
	s, _ := menu.Apply(menu.State{ConsoleURL: "https://console.example"}, menu.StatusEvent{Status: st})
	return menu.Build(s, time.Now())
}

func TestRenderLayoutAndPools(t *testing.T) {
	b := &fakeBackend{}
	tr := newTray(b, func(menu.Op) {})
	tr.Render(menuWith("ky3", "xym"))
	want := []string{"Signed in as ana@example.com", menu.TitleConnect, "ky3", "xym", menu.TitleConsole, menu.TitleQuit}
	if got := b.visibleTitles(); !slices.Equal(got, want) {
		t.Fatalf("menu %q, want %q", got, want)
	}
	if n := len(b.items); n != 1+initialNotices+1+initialClusters+initialClusterLines+2 {
		t.Fatalf("%d items", n)
	}
	if it := b.itemTitled("ky3"); !it.checkable || it.checked {
		t.Fatalf("ky3 row %+v", it)
	}
}

// The cluster section's placeholder is a plain item, not an unchecked
// checkbox; rows come back as checkboxes.
func TestPlaceholderIsNoCheckbox(t *testing.T) {
	b := &fakeBackend{}
	tr := newTray(b, func(menu.Op) {})
	m := menuWith()
	if len(m.Clusters) != 1 || m.Clusters[0].Checkable {
		t.Fatalf("the model's placeholder %+v", m.Clusters)
	}
	tr.Render(m)
	want := []string{"Signed in as ana@example.com", menu.TitleConnect, m.Clusters[0].Title, menu.TitleConsole, menu.TitleQuit}
	if got := b.visibleTitles(); !slices.Equal(got, want) {
		t.Fatalf("menu %q, want %q", got, want)
	}
	if it := b.itemTitled(m.Clusters[0].Title); it.checkable || it.enabled {
		t.Fatalf("placeholder %+v", it)
	}
	tr.Render(menuWith("ky3"))
	if got := b.visibleTitles(); slices.Contains(got, m.Clusters[0].Title) || !slices.Contains(got, "ky3") {
		t.Fatalf("menu %q", got)
	}
	if it := b.itemTitled("ky3"); !it.checkable {
		t.Fatalf("row %+v", it)
	}
	tr.Render(m)
	if got := b.visibleTitles(); !slices.Equal(got, want) {
		t.Fatalf("back to none: menu %q, want %q", got, want)
	}
	if slices.Contains(b.take(), "reset") {
		t.Fatal("rebuilt the menu")
	}
}

func TestRenderChangesOnlyWhatDiffers(t *testing.T) {
	b := &fakeBackend{}
	tr := newTray(b, func(menu.Op) {})
	m := menuWith("ky3", "xym")
	tr.Render(m)
	b.take()
	tr.Render(m)
	if c := b.take(); len(c) != 0 {
		t.Fatalf("same menu, calls %q", c)
	}
	m2 := m
	m2.Clusters = slices.Clone(m.Clusters)
	m2.Clusters[0].Title = "ky3 — no handshake"
	m2.Clusters[0].Checked = true
	tr.Render(m2)
	row := b.itemTitled("ky3 — no handshake").n
	if c, want := b.take(), []string{fmt.Sprintf("%d title ky3 — no handshake", row), fmt.Sprintf("%d check", row)}; !slices.Equal(c, want) {
		t.Fatalf("calls %q, want %q", c, want)
	}
	// One cluster fewer: its row is hidden, nothing is rebuilt.
	m3 := menuWith("ky3")
	tr.Render(m3)
	c := b.take()
	if slices.Contains(c, "reset") || !slices.ContainsFunc(c, func(s string) bool { return strings.HasSuffix(s, " hide") }) {
		t.Fatalf("calls %q", c)
	}
	if got := b.visibleTitles(); slices.Contains(got, "xym") {
		t.Fatalf("xym still shown: %q", got)
	}
}

func TestRenderGrowsThePool(t *testing.T) {
	b := &fakeBackend{}
	tr := newTray(b, func(menu.Op) {})
	var cids []string
	for i := range initialClusters + 3 {
		cids = append(cids, fmt.Sprintf("c%02d", i))
	}
	tr.Render(menuWith(cids...))
	if !slices.Contains(b.take(), "reset") {
		t.Fatal("no rebuild for a larger menu")
	}
	got := b.visibleTitles()
	if len(got) != 1+1+len(cids)+2 || got[2] != "c00" || got[len(got)-1] != menu.TitleQuit {
		t.Fatalf("menu %q", got)
	}
}

func TestClicksReachTheApp(t *testing.T) {
	b := &fakeBackend{}
	clicks := make(chan menu.Op, 4)
	tr := newTray(b, func(op menu.Op) { clicks <- op })
	tr.Render(menuWith("ky3"))
	b.itemTitled("ky3").clicked <- struct{}{}
	if op := <-clicks; op != (menu.Op{Kind: menu.OpConnect, CID: "ky3"}) {
		t.Fatalf("op %v", op)
	}
	b.itemTitled(menu.TitleConnect).clicked <- struct{}{}
	if op := <-clicks; op.Kind != menu.OpUp {
		t.Fatalf("op %v", op)
	}
	// A disabled line (the status) sends nothing.
	b.itemTitled("Signed in as ana@example.com").clicked <- struct{}{}
	b.itemTitled(menu.TitleQuit).clicked <- struct{}{}
	if op := <-clicks; op.Kind != menu.OpQuit {
		t.Fatalf("op %v, want quit (the status line must not click)", op)
	}
}
