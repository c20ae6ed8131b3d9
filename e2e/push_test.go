//go:build !windows

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/lab"
)

// TestOlderClientsLongPoll: daemons and gateways as they were before push
// streams (--long-poll) against today's control: two laptops follow a move
// there and back, a sign-out takes a laptop off the gateway, and control's
// metrics show long-polls held, no stream.
func TestOlderClientsLongPoll(t *testing.T) {
	w := newWorldWith(t, lab.Options{Clients: 2, LongPoll: true, Metrics: true})
	laptops := []string{w.env.Clients[0].Host, w.env.Clients[1].Host}
	for _, h := range laptops {
		w.must(h, nil, "runos", "vpn", "up", "--cid", "ky3")
		w.waitStatus(h, 30*time.Second, "connected to ky3 on n1", upOn("n1", "ky3"))
	}
	w.promEquals(`sum(runos_control_longpolls_held{kind="device_map"})`, 2)
	w.promEquals(`sum(runos_control_longpolls_held{kind="gateway_map"})`, 3)
	w.promEquals(`sum(runos_control_streams_held) or vector(0)`, 0)

	for _, target := range []string{"n2", "n1"} {
		m, out, err := w.move(target)
		if err != nil || m.State != "done" || m.Devices.Switched != 2 {
			t.Fatalf("move to %s: %v %+v\n%s", target, err, m, out)
		}
		for _, h := range laptops {
			w.waitStatus(h, 10*time.Second, "on "+target+" with peerUp", upOn(target, "ky3"))
		}
	}

	// A sign-out: the gateway's long-poll takes the laptop off at once.
	gone := w.status(laptops[1]).Tunnel.PublicKey
	w.must(laptops[1], nil, "runos", "vpn", "down")
	w.waitFor(5*time.Second, "the signed-out laptop off ky3-n1", func() bool {
		return !strings.Contains(w.gatewayPeers("ky3-n1"), gone)
	})
	if st := w.status(laptops[0]); !upOn("n1", "ky3")(st) {
		t.Errorf("the other laptop after the sign-out: %+v", st.Clusters)
	}
	w.promEquals(`sum(runos_control_streams_held) or vector(0)`, 0)
}
