package vpnd

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/resolvedtest"
	"github.com/runos/vpn/vpnd/localapi"
)

// statusHold is how long systemd-resolved stays stopped while status is
// asked for.
const statusHold = 2 * time.Second

// TestStatusWhileResolvedIsStopped measures what `runos vpn status` (GET
// /v1/status on the local socket, as the CLI and the tray ask) takes while
// a connect waits for split DNS: systemd-resolved is stopped (SIGSTOP)
// before the connect, so the daemon's SetLinkDNS hangs until it is
// continued. The daemon applies plans outside its lock, so status answers
// from its snapshot meanwhile; the test records the latencies and logs
// their p50, p99 and maximum (a measurement: no wall-clock bound is
// asserted). It does check that it measured what it says: ky3's map had
// arrived, its DNS was still being applied during the whole window (ky3 not
// up: a cluster is shown up only once its names resolve), and it came up
// once resolved was continued.
func TestStatusWhileResolvedIsStopped(t *testing.T) {
	netnstest.Require(t, resolvedtest.Commands...)
	l := newLab(t)
	resolvedtest.BindMountedResolvConf(t, l.laptop, resolvedtest.StubResolvConf)
	bus := resolvedtest.PrivateSystemBus(t)
	res := resolvedtest.Start(t, l.laptop, bus)
	res.SetLink(t, "eth0", []string{"10.0.0.2"}, []string{"~."})
	l.env = []string{"T_DNS=auto", "DBUS_SYSTEM_BUS_ADDRESS=" + bus}
	l.start()
	l.signIn(t)
	ctx := context.Background()
	if st, err := l.client.Status(ctx); err != nil || st.DNS.Mode != "systemd-resolved" {
		t.Fatalf("dns mode: %+v %v", st, err)
	}

	pid := res.Cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	cont := func() {
		if !continued {
			continued = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(cont)
	connected := make(chan error, 1)
	go func() { _, err := l.client.Connect(ctx, "ky3"); connected <- err }()
	l.waitStatus("ky3's map in", func(st *localapi.Status) bool { return cluster(*st, "ky3").Server.NodeID != "" })

	var lat []time.Duration
	for end := time.Now().Add(statusHold); time.Now().Before(end); {
		start := time.Now()
		st, err := l.client.Status(ctx)
		lat = append(lat, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
		if cluster(*st, "ky3").PeerUp {
			t.Fatalf("ky3 came up while resolved was stopped: the slow DNS was not measured (%+v)", cluster(*st, "ky3"))
		}
	}
	cont()
	l.waitStatus("ky3 up once resolved answers", peerUp("ky3"))
	if err := <-connected; err != nil {
		t.Fatal(err)
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	t.Logf("status while resolved was stopped for %v: %d requests, p50 %v, p99 %v, max %v",
		statusHold, len(lat), q(0.50), q(0.99), lat[len(lat)-1])
	// Generous (a loaded CI machine): the old daemon took the whole stop.
	if q(0.99) >= statusHold/2 {
		t.Errorf("status p99 %v while DNS was being applied: status waits for it", q(0.99))
	}
}
