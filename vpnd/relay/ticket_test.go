package relay

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"
)

type nopStream struct{}

func (nopStream) Read([]byte) (int, error)    { return 0, errors.New("nothing") }
func (nopStream) Write(p []byte) (int, error) { return len(p), nil }
func (nopStream) Close() error                { return nil }

// A destination shows its relay ticket again on its next dials (a race of
// the paths can dial every few seconds, and each ticket was a request to
// control) until ticketMargin before it expires; after a failed dial, or
// with no expiry said, it asks again.
func TestRelayTicketShownAgainUntilItExpires(t *testing.T) {
	clk := &syncClock{now: t0}
	asked := 0
	sayExpiry := true // control says each ticket lasts 2 minutes
	failDial := false
	var shown []string
	b := New(Config{Inner: nullBind{}, Now: clk.Now, Log: slog.New(slog.DiscardHandler),
		Ticket: func(context.Context, string) (string, time.Time, error) {
			asked++
			var expires time.Time
			if sayExpiry {
				expires = clk.Now().Add(2 * time.Minute)
			}
			return "ticket-" + string(rune('0'+asked)), expires, nil
		},
		Dial: func(_ context.Context, _ Dest, ticket string) (Stream, error) {
			shown = append(shown, ticket)
			if failDial {
				return nil, errors.New("the relay refused: unknown or revoked token")
			}
			return nopStream{}, nil
		},
		Captive: func(context.Context, string) (string, bool) { return "", false }})
	defer b.Stop()
	ep := netip.MustParseAddrPort("10.77.0.21:32768")
	b.SetDests([]Dest{{CID: "ky3", Endpoint: ep, RelayURL: "https://10.77.0.21/runos-vpn/relay"}})
	d := (*b.dests.Load())[ep]
	dial := func() error {
		_, err := d.dial(context.Background())
		return err
	}

	for range 3 {
		if err := dial(); err != nil {
			t.Fatal(err)
		}
		clk.add(20 * time.Second)
	}
	if asked != 1 {
		t.Fatalf("three dials within the ticket's life asked control %d times, want once", asked)
	}
	clk.add(50 * time.Second) // 110 s of 120: under ticketMargin left
	if err := dial(); err != nil || asked != 2 {
		t.Fatalf("a ticket about to expire was shown again (asked %d, err %v)", asked, err)
	}
	failDial = true
	if err := dial(); err == nil {
		t.Fatal("the refused dial succeeded")
	}
	failDial = false
	if err := dial(); err != nil || asked != 3 {
		t.Fatalf("after a refused dial the same ticket was shown again (asked %d, err %v)", asked, err)
	}
	if want := []string{"ticket-1", "ticket-1", "ticket-1", "ticket-2", "ticket-2", "ticket-3"}; !slices.Equal(shown, want) {
		t.Fatalf("tickets shown %v, want %v", shown, want)
	}

	sayExpiry = false // control says nothing of a ticket's life: never kept
	before := asked
	_ = dial() // shows the kept ticket-3 (its life was said)
	d.ticket = ""
	_ = dial()
	_ = dial()
	if asked != before+2 {
		t.Fatalf("tickets with no expiry were kept: %d asked for 2 dials", asked-before)
	}
}
