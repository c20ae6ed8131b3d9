package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// TestStreamsPerTokenAndDevice: one token holds at most 100 streams (and
// long-polls) at once, one device's map at most maxHeldPerDevice: the next
// is answered 429 too_many at once, saying why, and a place freed is
// taken again.
func TestStreamsPerTokenAndDevice(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := func(c *api.Client) chan error {
		errc := make(chan error, 1)
		go func() {
			errc <- c.WatchVPNService(ctx, "ky3", "wg-ky3", 0, func(*api.VPNService) error { return nil })
		}()
		return errc
	}
	for range 100 {
		watch(e.op)
	}
	e.waitStreams(100)
	err := <-watch(e.op)
	ae := wantCode(t, err, http.StatusTooManyRequests, api.CodeTooMany)
	t.Logf("the 101st: %v", ae)
	// Another token is not affected.
	other := watch(e.signIn("ada@example.com"))
	e.waitStreams(101)
	select {
	case err := <-other:
		t.Fatalf("another token's stream: %v", err)
	default:
	}

	// One device's map, held by long-polls this time.
	d := e.newDevice("bob@example.com", "laptop")
	dm, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithCancel(ctx)
	var polls []chan polled[*api.DeviceMap]
	for range maxHeldPerDevice {
		polls = append(polls, poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(dctx, d.dev.ID, dm.Version, time.Hour) }))
	}
	e.waitWatchers(maxHeldPerDevice)
	err = d.c.WatchDeviceMap(ctx, d.dev.ID, 0, func(*api.DeviceMap) error { return nil })
	wantCode(t, err, http.StatusTooManyRequests, api.CodeTooMany)
	_, err = d.c.DeviceMap(ctx, d.dev.ID, dm.Version, time.Hour)
	wantCode(t, err, http.StatusTooManyRequests, api.CodeTooMany)
	// Another user asking for it learns nothing, and takes no place.
	_, err = e.signIn("eve@example.com").DeviceMap(ctx, d.dev.ID, dm.Version, time.Hour)
	wantCode(t, err, http.StatusNotFound, api.CodeNotFound)
	// The long-polls go: their places come back.
	dcancel()
	for _, c := range polls {
		recv(t, c)
	}
	e.waitWatchers(0)
	for i := 0; e.srv.heldBy(deviceHoldKey("bob@example.com", d.dev.ID)) > 0; i++ {
		if i > 5000 {
			t.Fatalf("device %s still holds %d places after its long-polls ended", d.dev.ID, e.srv.heldBy(deviceHoldKey("bob@example.com", d.dev.ID)))
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0); err != nil {
		t.Fatalf("after the long-polls ended: %v", err)
	}
}

// heldBy is how many places key holds now.
func (s *Server) heldBy(key string) int {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	return s.held.n[key]
}
