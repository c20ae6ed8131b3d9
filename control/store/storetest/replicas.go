package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// What replicas share through the store: secrets, leases, and changes
// made at once through several handles that must still be serialized.

func testSecret(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	a, err := s.Secret(ctx, "csrf", 32)
	if err != nil || len(a) != 32 {
		t.Fatalf("secret = %x, %v", a, err)
	}
	b, err := s.Secret(ctx, "csrf", 32)
	if err != nil || string(a) != string(b) {
		t.Fatalf("second read = %x, %v; want %x", b, err, a)
	}
	if c, _ := s.Secret(ctx, "other", 32); string(c) == string(a) {
		t.Fatal("two secrets alike")
	}
}

// allocate registers devices at once, each taking the lowest free address
// index in its own change, as joins do.
func allocate(t *testing.T, stores []store.Store, n int) {
	var wg sync.WaitGroup
	for i := range n {
		s := stores[i%len(stores)]
		wg.Go(func() {
			_, err := s.Update(ctx, func(w store.Writer) error {
				idx, err := w.FreeDeviceAddrIndex(2, 1000)
				if err != nil {
					return err
				}
				w.Touch(fmt.Sprint("device:c", i))
				return w.PutDevice(model.Device{ID: fmt.Sprint("c", i), User: "a@x", PublicKey: fmt.Sprint("key", i), AddrIndex: idx})
			})
			if err != nil {
				t.Errorf("allocation %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	view(t, stores[0], func(r store.Reader) error {
		seen := map[int]string{}
		for i := range n {
			d, err := r.Device(fmt.Sprint("c", i))
			if err != nil {
				t.Errorf("device c%d: %v", i, err)
				continue
			}
			if other, dup := seen[d.AddrIndex]; dup {
				t.Errorf("c%d and %s both got index %d", i, other, d.AddrIndex)
			}
			seen[d.AddrIndex] = d.ID
		}
		if g, _ := r.GlobalVersion(); g != uint64(n)+1 {
			t.Errorf("global version %d after %d changes", g, n+1)
		}
		return nil
	})
}

func testConcurrentAllocations(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	allocate(t, []store.Store{s}, 30)
}

func testReplicaAllocations(t *testing.T, open func(*testing.T) store.Store) {
	a, b, c := open(t), open(t), open(t)
	seedBasics(t, a)
	allocate(t, []store.Store{a, b, c}, 50)
}

func testSharedSecret(t *testing.T, open func(*testing.T) store.Store) {
	a, b := open(t), open(t)
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			v, err := s.Secret(ctx, "csrf", 32)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for i := range got {
		if string(got[i]) != string(got[0]) || len(got[i]) != 32 {
			t.Fatalf("replicas asking at once got different secrets: %x vs %x", got[i], got[0])
		}
	}
}

func testLease(t *testing.T, open func(*testing.T) store.Store) {
	a, b, c := open(t), open(t), open(t)
	la, err := a.Lease(ctx, "timers")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan store.Lease, 1)
	go func() {
		l, err := b.Lease(ctx, "timers")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// Another lease name is independent.
	lo, err := c.Lease(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	lo.Release()
	// While a holds it, a third replica that gives up waiting gets nothing.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := c.Lease(short, "timers"); err == nil {
		t.Fatal("a second replica got the lease while the first held it")
	}
	cancel()
	if _, err := c.TryLease(ctx, "timers"); !errors.Is(err, store.ErrHeld) {
		t.Fatalf("TryLease while a holds it: %v, want ErrHeld", err)
	}
	select {
	case <-got:
		t.Fatal("b got the lease while a held it")
	default:
	}
	la.Release()
	lb := <-got
	select {
	case <-la.Lost():
	default:
		t.Fatal("a's lease not lost after Release")
	}
	// The holder's store closes (its process dies): the next one takes over.
	go func() {
		l, err := c.Lease(ctx, "timers")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	b.Close()
	lc := <-got
	<-lb.Lost()
	lc.Release()
	ld, err := a.TryLease(ctx, "timers")
	if err != nil {
		t.Fatalf("TryLease of a free lease: %v", err)
	}
	ld.Release()
}
