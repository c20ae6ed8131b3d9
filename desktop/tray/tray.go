// Package tray renders desktop/menu's Menu in the system tray (the macOS
// menu bar, the Windows notification area, a StatusNotifierItem on Linux)
// with fyne.io/systray, and turns clicks into menu.Ops.
//
// systray can append items but not insert them, and removing one means
// rebuilding the whole menu, so the tray keeps a fixed layout of item
// pools (notices, cluster rows), hides the rows it does not need, and
// updates the others in place, calling systray only for what changed.
// When a pool is too small it rebuilds the menu once with a larger pool.
//
// Cluster rows are checkbox items, and a checkbox item stays one (a tray
// draws its box, checked or not), so the cluster section's lines that are
// no row ("No cluster to connect to") have their own plain items.
package tray

import (
	"sync"

	"github.com/runos/vpn/desktop/icons"
	"github.com/runos/vpn/desktop/menu"
)

// item is the part of *systray.MenuItem the tray uses.
type item interface {
	SetTitle(string)
	SetTooltip(string)
	Enable()
	Disable()
	Check()
	Uncheck()
	Show()
	Hide()
	Clicked() <-chan struct{} // closed when the item is removed
}

// backend is systray's package-level API, behind an interface so the
// diffing is tested without a display.
type backend interface {
	AddItem(checkable bool) item
	AddSeparator()
	Reset() // remove every item
	SetIcon(template, regular []byte)
	SetTooltip(string)
}

// Initial pool sizes; a menu needing more rebuilds with twice as many.
const (
	initialNotices      = 6
	initialClusters     = 8
	initialClusterLines = 1
)

// Tray renders menus. Render and the click callback may run on any
// goroutine.
type Tray struct {
	b     backend
	click func(menu.Op)

	mu       sync.Mutex
	status   *slot
	notices  []*slot
	toggle   *slot
	clusters []*slot // checkable rows
	lines    []*slot // plain lines in the cluster section (the placeholder)
	console  *slot
	quit     *slot
	icon     menu.Icon
	iconSet  bool
	tooltip  string
}

// slot is one systray item and what it shows now.
type slot struct {
	it      item
	cur     menu.Item
	visible bool
	fresh   bool // nothing applied yet
}

func newTray(b backend, click func(menu.Op)) *Tray {
	t := &Tray{b: b, click: click}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.build(initialNotices, initialClusters, initialClusterLines)
	return t
}

// build lays the menu out: status, notices, toggle, cluster rows and
// lines, console, quit.
func (t *Tray) build(notices, clusters, lines int) {
	t.status = t.add(false)
	t.notices = t.addN(notices, false)
	t.toggle = t.add(false)
	t.b.AddSeparator()
	t.clusters = t.addN(clusters, true)
	t.lines = t.addN(lines, false)
	t.b.AddSeparator()
	t.console = t.add(false)
	t.quit = t.add(false)
}

func (t *Tray) addN(n int, checkable bool) []*slot {
	out := make([]*slot, n)
	for i := range out {
		out[i] = t.add(checkable)
	}
	return out
}

func (t *Tray) add(checkable bool) *slot {
	s := &slot{it: t.b.AddItem(checkable), visible: true, fresh: true}
	go func() {
		for range s.it.Clicked() {
			t.mu.Lock()
			op := s.cur.Click
			ok := s.visible && s.cur.Enabled
			t.mu.Unlock()
			if ok && op.Kind != menu.OpNone {
				t.click(op)
			}
		}
	}()
	return s
}

// Render shows m, changing only what differs from the last menu.
func (t *Tray) Render(m menu.Menu) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var rows, lines []menu.Item
	for _, it := range m.Clusters {
		if it.Checkable {
			rows = append(rows, it)
		} else {
			lines = append(lines, it)
		}
	}
	if len(m.Notices) > len(t.notices) || len(rows) > len(t.clusters) || len(lines) > len(t.lines) {
		t.b.Reset()
		t.build(grow(len(t.notices), len(m.Notices)), grow(len(t.clusters), len(rows)), grow(len(t.lines), len(lines)))
	}
	if !t.iconSet || t.icon != m.Icon {
		t.b.SetIcon(icons.Template(m.Icon), icons.Tray(m.Icon))
		t.icon, t.iconSet = m.Icon, true
	}
	if m.Tooltip != t.tooltip {
		t.b.SetTooltip(m.Tooltip)
		t.tooltip = m.Tooltip
	}
	t.status.apply(m.Status, true)
	applyPool(t.notices, m.Notices)
	t.toggle.apply(m.Toggle, true)
	applyPool(t.clusters, rows)
	applyPool(t.lines, lines)
	t.console.apply(m.Console, true)
	t.quit.apply(m.Quit, true)
}

// refresh sends the icon and tooltip again, changed or not.
func (t *Tray) refresh() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.iconSet {
		t.b.SetIcon(icons.Template(t.icon), icons.Tray(t.icon))
	}
	t.b.SetTooltip(t.tooltip)
}

func grow(have, need int) int {
	for have < need {
		have *= 2
	}
	return have
}

func applyPool(pool []*slot, items []menu.Item) {
	for i, s := range pool {
		if i < len(items) {
			s.apply(items[i], true)
		} else {
			s.apply(s.cur, false)
		}
	}
}

func (s *slot) apply(it menu.Item, visible bool) {
	old := s.cur
	if s.fresh || it.Title != old.Title {
		s.it.SetTitle(it.Title)
	}
	if s.fresh || it.Tooltip != old.Tooltip {
		s.it.SetTooltip(it.Tooltip)
	}
	if s.fresh || it.Enabled != old.Enabled {
		if it.Enabled {
			s.it.Enable()
		} else {
			s.it.Disable()
		}
	}
	if s.fresh || it.Checked != old.Checked {
		if it.Checked {
			s.it.Check()
		} else {
			s.it.Uncheck()
		}
	}
	if s.fresh || visible != s.visible {
		if visible {
			s.it.Show()
		} else {
			s.it.Hide()
		}
	}
	s.cur, s.visible, s.fresh = it, visible, false
}
