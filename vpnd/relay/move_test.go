package relay

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
)

// TestMoveWhileRelayedStaysRelayed: the cluster's server moves (a new
// endpoint and relay) while the cluster is relayed: the new destination
// starts on the new node's relay instead of waiting for UDP to fail again.
func TestMoveWhileRelayedStaysRelayed(t *testing.T) {
	dialed := make(chan string, 10)
	b := New(Config{Inner: conn.NewStdNetBind(), Log: slog.New(slog.DiscardHandler),
		Ticket: func(context.Context, string) (string, time.Time, error) { return "ticket", time.Time{}, nil },
		Dial: func(_ context.Context, to Dest, _ string) (Stream, error) {
			dialed <- to.RelayURL
			return nil, errors.New("not in this test")
		},
		Captive: func(context.Context, string) (string, bool) { return "", false }})
	defer b.Stop()
	n1 := netip.MustParseAddrPort("10.77.0.21:32768")
	n2 := netip.MustParseAddrPort("198.51.100.22:32768")
	b.SetDests([]Dest{{CID: "ky3", Endpoint: n1, RelayURL: "https://10.77.0.21/runos-vpn/relay"},
		{CID: "xym", Endpoint: netip.MustParseAddrPort("198.51.100.31:32768"), RelayURL: "https://198.51.100.31/runos-vpn/relay"}})
	d := (*b.dests.Load())[n1]
	d.mu.Lock()
	d.dec.switchTo(time.Now(), Relay, "test")
	d.mu.Unlock()
	b.SetDests([]Dest{{CID: "ky3", Endpoint: n2, RelayURL: "https://198.51.100.22/runos-vpn/relay"},
		{CID: "xym", Endpoint: netip.MustParseAddrPort("198.51.100.31:32768"), RelayURL: "https://198.51.100.31/runos-vpn/relay"}})
	for _, st := range b.States() {
		switch st.CID {
		case "ky3":
			if st.Endpoint != n2 || st.Path != Relay {
				t.Errorf("ky3 after the move: %+v, want relayed at n2", st)
			}
		case "xym":
			if st.Path != Direct {
				t.Errorf("xym was never relayed: %+v", st)
			}
		}
	}
	deadline := time.After(5 * time.Second)
	for { // n1's relay may have been dialed before the move: n2's must follow
		select {
		case u := <-dialed:
			if u == "https://198.51.100.22/runos-vpn/relay" {
				return
			}
		case <-deadline:
			t.Fatal("the new node's relay was not dialed")
		}
	}
}
