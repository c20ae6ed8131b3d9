package storetest

import (
	"errors"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/store"
)

// testClusterInside: what lies inside a cluster is kept per cluster,
// replaced whole, never keeps Mapped, and is not found before a report.
func testClusterInside(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	view(t, s, func(r store.Reader) error {
		if _, err := r.ClusterInside("ky3"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("before any report: %v, want not found", err)
		}
		return nil
	})
	first := api.ClusterInside{NodeNetwork: "10.10.0.0/24", PodRange: "10.244.0.0/16", ServiceRange: "10.96.0.0/12",
		DNSServer: "10.96.0.10", APIAddress: "10.10.0.100", Mapped: "fd52:4f53:5600:1::/96"}
	update(t, s, func(w store.Writer) error { return w.PutClusterInside("ky3", first) })
	view(t, s, func(r store.Reader) error {
		got, err := r.ClusterInside("ky3")
		want := first
		want.Mapped = ""
		if err != nil || got != want {
			t.Errorf("read back %+v, %v; want %+v", got, err, want)
		}
		return nil
	})
	second := api.ClusterInside{ServiceRange: "10.96.0.0/16"}
	update(t, s, func(w store.Writer) error { return w.PutClusterInside("ky3", second) })
	view(t, s, func(r store.Reader) error {
		if got, err := r.ClusterInside("ky3"); err != nil || got != second {
			t.Errorf("replaced: read back %+v, %v; want %+v", got, err, second)
		}
		return nil
	})
	if _, err := s.Update(ctx, func(w store.Writer) error { return w.PutClusterInside("nope", second) }); err == nil {
		t.Error("the inside of an unknown cluster was kept")
	}
}
