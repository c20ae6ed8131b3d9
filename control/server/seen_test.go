package server

import (
	"context"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/store"
)

// TestMapOfAnotherTenantsDeviceIsNoContact: asking for another tenant's
// device map answers 404 and writes nothing: the device's last contact
// stays where its own polls left it (else anyone could keep a device from
// idle clean-up, one unauthenticated write per request).
func TestMapOfAnotherTenantsDeviceIsNoContact(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")
	seen := func() time.Time {
		var at time.Time
		if err := e.st.View(ctx, func(r store.Reader) error {
			dev, err := r.Device(d.dev.ID)
			at = dev.LastSeen
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return at
	}
	before := seen()
	e.clk.Advance(2 * seenEvery)
	_, err := e.signIn("eve@example.com").DeviceMap(ctx, d.dev.ID, 0, 0)
	wantCode(t, err, 404, api.CodeNotFound)
	if after := seen(); !after.Equal(before) {
		t.Fatalf("another tenant's request moved the device's last contact from %s to %s", before, after)
	}
	// The device's own poll still counts.
	if _, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0); err != nil {
		t.Fatal(err)
	}
	if after := seen(); !after.Equal(e.clk.Now()) {
		t.Fatalf("the device's own poll: last contact %s, want %s", after, e.clk.Now())
	}
}
