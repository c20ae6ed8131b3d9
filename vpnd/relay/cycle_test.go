package relay_test

import (
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/relay"
)

// TestBlockUnblockCycles: UDP goes and comes back under a steady stream,
// three times: each time the stream moves to the relay within 5 s and
// back to UDP within 10 s (a probe every 5 s).
func TestBlockUnblockCycles(t *testing.T) {
	p := newPair(t, false, "tok")
	if !p.waitReply(5 * time.Second) {
		t.Fatal("no reply over UDP")
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				p.ping()
			}
		}
	}()
	for i := range 3 {
		for range 25 {
			<-p.replies
		}
		p.udp.blocked.Store(true)
		took := p.waitPath(relay.Relay, 5*time.Second)
		for range 25 {
			<-p.replies
		}
		p.udp.blocked.Store(false)
		back := p.waitPath(relay.Direct, 10*time.Second)
		t.Logf("cycle %d: relayed after %s, direct again after %s", i+1, took.Round(time.Millisecond), back.Round(time.Millisecond))
	}
}
