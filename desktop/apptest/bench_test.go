//go:build linux

package apptest

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/runos/vpn/vpnd/localapi"
)

// labelSignal waits for an ItemsPropertiesUpdated signal that sets label.
func labelSignal(b *testing.B, ch <-chan *dbus.Signal, label string) {
	deadline := time.After(30 * time.Second)
	for {
		select {
		case sig := <-ch:
			if sig.Name != "com.canonical.dbusmenu.ItemsPropertiesUpdated" || len(sig.Body) == 0 {
				continue
			}
			var updated []struct {
				ID    int32
				Props map[string]dbus.Variant
			}
			if dbus.Store(sig.Body[:1], &updated) != nil {
				continue
			}
			for _, u := range updated {
				if v, ok := u.Props["label"]; ok && v.Value() == label {
					return
				}
			}
		case <-deadline:
			b.Fatalf("no update to %q", label)
		}
	}
}

// BenchmarkDaemonChangeToTray is the time from a change in the daemon to
// the tray host being told the new row text over D-Bus: the local API's
// stream, the menu model, the systray adapter and dbusmenu, with the real
// binary. It also reports the app's resident memory.
func BenchmarkDaemonChangeToTray(b *testing.B) {
	ky3 := cluster("ky3", true, localapi.ClusterConnected)
	ky3.PeerUp = true
	w := newWorld(b, signedIn(ky3, cluster("xym", false, localapi.ClusterDisconnected)), config)
	p := startApp(b, w.env)
	reg := w.watcher.next(b)
	c, err := dbus.Connect(w.bus.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.AddMatchSignal(dbus.WithMatchSender(reg.Sender), dbus.WithMatchInterface("com.canonical.dbusmenu")); err != nil {
		b.Fatal(err)
	}
	ch := make(chan *dbus.Signal, 1024)
	c.Signal(ch)
	// Start-up done: the menu shows the daemon's state; what it signalled
	// on the way is dropped, so no loop below takes an old signal for its own.
	readMenu(b, w.bus.conn(b), reg).until("the menu at start", has("ky3"))
	for len(ch) > 0 {
		<-ch
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		up := i%2 == 1
		want := "ky3 — no handshake"
		if up {
			want = "ky3"
		}
		w.d.Update(func(s *localapi.Status) { s.Clusters[0].PeerUp = up })
		labelSignal(b, ch, want)
	}
	b.StopTimer()
	if kb := rssKB(p.cmd.Process.Pid); kb > 0 {
		b.ReportMetric(float64(kb)/1024, "rss-MB")
	}
}

func rssKB(pid int) int {
	s, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(s), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}
