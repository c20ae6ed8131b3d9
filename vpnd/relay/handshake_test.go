package relay_test

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOnHandshakeAfterTheDeviceRecordsIt: real wireguard-go on both ends,
// over UDP and over the relay (UDP blocked). The laptop Bind's OnHandshake
// is called once for the connect's handshake, and a read of the laptop's
// device at that moment already shows it: the daemon may read at once
// instead of at its next poll.
func TestOnHandshakeAfterTheDeviceRecordsIt(t *testing.T) {
	for _, blocked := range []bool{false, true} {
		name := map[bool]string{false: "udp", true: "relay"}[blocked]
		t.Run(name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				calls int
				seen  []string // last_handshake_time_sec read inside each call
			)
			called := make(chan struct{}, 10)
			pr := newPair(t, blocked, "tok", func(q *pair) {
				// q is the pair newPair returns; its laptop device is
				// set before the device is up, so before any call.
				q.onHandshake = func() {
					// Read while the call lasts: the daemon's read (woken
					// here) can only come later. In a goroutine, bounded,
					// so a call made under one of wireguard-go's locks
					// fails the test rather than hanging it.
					read := make(chan string, 1)
					go func() {
						cfg, err := q.laptop.IpcGet()
						if err != nil {
							read <- "error: " + err.Error()
							return
						}
						read <- lastHandshake(cfg)
					}()
					var got string
					select {
					case got = <-read:
					case <-time.After(2 * time.Second):
						got = "error: the device could not be read during the call"
					}
					mu.Lock()
					calls++
					seen = append(seen, got)
					mu.Unlock()
					called <- struct{}{}
				}
			})
			if !pr.waitReply(10 * time.Second) {
				t.Fatalf("no reply; path %+v", pr.path())
			}
			select {
			case <-called:
			case <-time.After(5 * time.Second):
				t.Fatal("OnHandshake not called after the first reply")
			}
			// More traffic on the same session: no more calls.
			for range 20 {
				pr.ping()
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			for i, s := range seen {
				if s == "" || s == "0" || strings.HasPrefix(s, "error") {
					t.Errorf("call %d: the device's last handshake read inside OnHandshake was %q, want it recorded", i, s)
				}
			}
			// Over the relay a race may send the initiation twice and
			// the first data once; a handshake is one call either way.
			if calls != 1 {
				t.Errorf("OnHandshake called %d times for one handshake (%v)", calls, seen)
			}
		})
	}
}

// lastHandshake is the UAPI's last_handshake_time_sec of the (one) peer.
func lastHandshake(uapi string) string {
	for _, l := range strings.Split(uapi, "\n") {
		if v, ok := strings.CutPrefix(l, "last_handshake_time_sec="); ok {
			return v
		}
	}
	return ""
}
