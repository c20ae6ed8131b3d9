//go:build !windows

package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestRelayRacesUDP is issue 24's race of the two paths in the lab: with
// UDP blocked a connect reaches peerUp over the relay without first
// waiting for UDP to fail; a UDP block in the middle of a 20 s transfer
// stops it briefly; UDP back, the path is direct again within 10 s. The
// times are reported; the bounds asserted are generous (the machine is
// shared), the targets are in docs/performance.md.
func TestRelayRacesUDP(t *testing.T) {
	netnstest.Require(t, "iperf3")
	w := newWorldWith(t, lab.Options{Clients: 1, BlockUDP: true})
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 20*time.Second, "ky3 up over the relay", relayedOn(localapi.PathRelay, "n1", "ky3"))
	c, _ := cluster(st, "ky3")

	// Connect → peerUp with UDP blocked, five times.
	var took []time.Duration
	for range 5 {
		w.must(laptop, nil, "runos", "vpn", "disconnect", "ky3")
		w.waitStatus(laptop, 10*time.Second, "ky3 down", func(s *localapi.Status) bool { c, _ := cluster(s, "ky3"); return !c.PeerUp })
		start := time.Now()
		w.must(laptop, nil, "runos", "vpn", "connect", "ky3")
		w.waitStatus(laptop, 10*time.Second, "ky3 up over the relay", relayedOn(localapi.PathRelay, "n1", "ky3"))
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("connect → peerUp over the relay, UDP blocked (n=5): min %s, median %s, max %s",
		took[0].Round(time.Millisecond), took[2].Round(time.Millisecond), took[4].Round(time.Millisecond))
	if took[4] > time.Second { // issue 24: under 1 s (measured 171–342 ms)
		t.Errorf("a connect with UDP blocked took %s to peerUp, want under 1 s: the relay was not raced beside UDP", took[4])
	}

	// UDP back: direct within 10 s, nothing typed.
	if err := w.lab.Unblock(context.Background(), laptop); err != nil {
		t.Fatal(err)
	}
	unblocked := time.Now()
	w.waitStatus(laptop, 10*time.Second, "direct", relayedOn(localapi.PathDirect, "n1", "ky3"))
	t.Logf("UDP back → path direct: %s", time.Since(unblocked).Round(time.Millisecond))

	// A 20 s transfer to the laptop; UDP blocked 5 s into it.
	srv, err := w.lab.Command(context.Background(), "ky3-n1", nil, "iperf3", "-s")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() })
	w.waitFor(10*time.Second, "iperf3 server", func() bool {
		c, err := w.lab.Dial(t.Context(), laptop, "tcp", "10.77.0.21:5201")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	blocked := make(chan error, 1)
	go func() {
		time.Sleep(5 * time.Second) // the block's moment in the transfer, not a wait for something
		blocked <- w.lab.Block(context.Background(), laptop, lab.BlockUDP)
	}()
	// -R: the node sends and the laptop's intervals count what arrived
	// (a sender's count what it wrote into its socket, which goes on
	// while the path is down).
	out := w.stdout(laptop, nil, "iperf3", "-c", c.Server.Address, "-R", "-t", "20", "-i", "0.1", "-J")
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	gap, err := longestStall(out)
	if err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	t.Logf("UDP blocked mid-transfer: the longest run of empty 0.1 s intervals spans %s", gap)
	if gap > time.Second { // issue 24: within 1 s (measured 600–700 ms)
		t.Errorf("the transfer stalled for %s when UDP was blocked, want data again within 1 s", gap)
	}
	w.waitStatus(laptop, 10*time.Second, "relayed", relayedOn(localapi.PathRelay, "n1", "ky3"))

	// UDP back again: direct within 10 s.
	if err := w.lab.Unblock(context.Background(), laptop); err != nil {
		t.Fatal(err)
	}
	unblocked = time.Now()
	w.waitStatus(laptop, 10*time.Second, "direct again", relayedOn(localapi.PathDirect, "n1", "ky3"))
	t.Logf("UDP back → path direct: %s", time.Since(unblocked).Round(time.Millisecond))
	m := w.metrics(laptop)
	for _, cm := range m.Clusters {
		if cm.CID == "ky3" {
			t.Logf("ky3 path switches counted: %d to the relay, %d to direct", cm.ToRelay, cm.ToDirect)
			// vpn up, five connects and the block mid-transfer: to the
			// relay; the two unblocks: to direct.
			if cm.ToRelay < 7 || cm.ToDirect < 2 {
				t.Errorf("path switches counted %+v, want at least 7 to the relay and 2 to direct", cm)
			}
		}
	}
}

// longestStall is the longest run of consecutive iperf3 intervals that
// carried nothing (at most a few packets), as time.
func longestStall(report string) (time.Duration, error) {
	var r struct {
		Intervals []struct {
			Sum struct {
				Seconds float64 `json:"seconds"`
				Bytes   float64 `json:"bytes"`
			} `json:"sum"`
		} `json:"intervals"`
	}
	if err := json.Unmarshal([]byte(report), &r); err != nil {
		return 0, err
	}
	var run, longest float64
	for _, iv := range r.Intervals {
		if iv.Sum.Bytes < 4<<10 {
			run += iv.Sum.Seconds
			longest = max(longest, run)
			continue
		}
		run = 0
	}
	return time.Duration(longest * float64(time.Second)), nil
}
