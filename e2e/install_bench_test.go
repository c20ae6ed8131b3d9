//go:build !windows

package e2e

import (
	"testing"
	"time"
)

// BenchmarkUpgradeInPlace: the service installed (System V, in a lab
// laptop) with two clusters connected, then `runos vpn install` run again
// n times: how long the upgrade command takes (stop, replace, register,
// start, the daemon answering) and how long until both clusters have a
// live handshake again, counted from the command's start.
func BenchmarkUpgradeInPlace(b *testing.B) {
	w := newInstallWorld(b)
	w.giveBrowser(w.operator)
	if out, err := w.install([]string{"SUDO_USER=" + w.operator.name}, "--ca-file", w.env.CAFile); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	for _, args := range [][]string{{"vpn", "up", "--cid", "ky3"}, {"vpn", "connect", "xym"}} {
		if out, err := w.as(w.operator, args...); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
	}
	w.waitStatus("client", 30*time.Second, "ky3 and xym up", upOn("", "ky3", "xym"))
	n := max(b.N, 5)
	var upgrade, reconnect []time.Duration
	b.ResetTimer()
	for range n {
		start := time.Now()
		if out, err := w.install(nil); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		upgrade = append(upgrade, time.Since(start))
		w.waitStatus("client", 60*time.Second, "ky3 and xym up again", upOn("", "ky3", "xym"))
		reconnect = append(reconnect, time.Since(start))
	}
	b.StopTimer()
	reportDurations(b, "upgrade", upgrade)
	reportDurations(b, "upgrade-to-peerUp", reconnect)
}
