//go:build !windows

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// TestDaemonKilledMidConnect stops the laptop's daemon dead (runos built
// with runosfault) at vpnd-join-answered: control has answered `runos vpn
// connect xym` (the device is in xym there, its gateway holds the peer)
// and the prefs' write wanting xym, which runs beside the join, may or may
// not have landed. The connect fails with the daemon gone; the daemon is
// started again (the lab's build, as the service manager would), and then
// the laptop and control must agree: xym wanted here and connected, or
// not wanted and no longer held by its gateway. The second case is made
// for certain by a state directory mounted read-only during the connect
// (a full or read-only disk does the same): the write never lands.
func TestDaemonKilledMidConnect(t *testing.T) {
	exe := faultBuild(t, "runos")
	for _, prefsWritten := range []bool{true, false} {
		name := map[bool]string{true: "prefs-written", false: "prefs-not-written"}[prefsWritten]
		t.Run(name, func(t *testing.T) { daemonKilledMidConnect(t, exe, prefsWritten) })
	}
}

func daemonKilledMidConnect(t *testing.T, exe string, prefsWritten bool) {
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	const point = "vpnd-join-answered"
	vpnd := w.startFaultBuild(laptop, "vpnd", exe, point)
	st := w.waitStatus(laptop, 30*time.Second, "ky3 up again", upOn("n1", "ky3"))
	pub := st.Tunnel.PublicKey
	state := filepath.Join(w.env.Dir, "hosts", laptop, "state")
	if !prefsWritten {
		// In the laptop's own mount namespace: the daemon's view only.
		w.must(laptop, nil, "mount", "--bind", state, state)
		w.must(laptop, nil, "mount", "-o", "remount,bind,ro", state)
	}

	out, err := w.run(laptop, nil, "runos", "vpn", "connect", "xym")
	if err == nil {
		t.Fatalf("runos vpn connect xym succeeded with its daemon stopped dead:\n%s", out)
	}
	t.Logf("the connect, its daemon gone: %v", strings.TrimSpace(out))
	w.waitStoppedDead(vpnd, point, 10*time.Second)
	w.waitFor(10*time.Second, "xym-n1 holding the laptop (control answered the join)", func() bool {
		return strings.Contains(w.gatewayPeers("xym-n1"), pub)
	})
	if !prefsWritten {
		w.must(laptop, nil, "umount", state)
	}

	restarted := time.Now()
	if err := w.lab.Restart(t.Context(), laptop, "vpnd"); err != nil {
		t.Fatal(err)
	}
	st = w.waitStatus(laptop, 30*time.Second, "ky3 up after the restart", upOn("n1", "ky3"))
	c, _ := cluster(st, "xym")
	if c.Wanted != prefsWritten {
		t.Fatalf("xym wanted %v after the restart; the prefs' write landed: %v", c.Wanted, prefsWritten)
	}
	if c.Wanted {
		// The restart joins xym as every wanted cluster, and connects it.
		w.waitStatus(laptop, 30*time.Second, "xym up after the restart", upOn("", "ky3", "xym"))
		t.Logf("xym was wanted on disk: connected %v after the restart", time.Since(restarted).Round(time.Millisecond))
		if !strings.Contains(w.gatewayPeers("xym-n1"), pub) {
			t.Error("xym up on the laptop but xym-n1 does not hold it")
		}
	} else {
		// Control's membership is left: xym's gateway lets the laptop go.
		w.waitFor(30*time.Second, "xym-n1 no longer holding the laptop", func() bool {
			return !strings.Contains(w.gatewayPeers("xym-n1"), pub)
		})
		t.Logf("xym was not wanted on disk: left on control %v after the restart", time.Since(restarted).Round(time.Millisecond))
		if c, _ := cluster(w.status(laptop), "xym"); c.PeerUp || c.Wanted {
			t.Errorf("xym on the laptop after the leave: %+v", c)
		}
	}
	if !upOn("n1", "ky3")(w.status(laptop)) {
		t.Error("ky3 not up after the restart's reconcile")
	}
	// Whichever it was, a connect now works.
	w.must(laptop, nil, "runos", "vpn", "connect", "xym")
	w.waitStatus(laptop, 30*time.Second, "xym up", func(s *localapi.Status) bool { return upOn("", "ky3", "xym")(s) })
}
