package metrics

import (
	"context"
	"time"

	"github.com/runos/vpn/control/store"
)

// Store returns st with every transaction timed
// (runos_control_store_transaction_seconds{kind="view"|"update"}).
func (m *Control) Store(st store.Store) store.Store {
	if m == nil {
		return st
	}
	return &timedStore{Store: st, m: m}
}

type timedStore struct {
	store.Store
	m *Control
}

func (s *timedStore) View(ctx context.Context, fn func(store.Reader) error) error {
	start := time.Now()
	err := s.Store.View(ctx, fn)
	s.m.storeTx.WithLabelValues("view").Observe(time.Since(start).Seconds())
	return err
}

func (s *timedStore) Update(ctx context.Context, fn func(store.Writer) error) (store.Change, error) {
	start := time.Now()
	ch, err := s.Store.Update(ctx, fn)
	s.m.storeTx.WithLabelValues("update").Observe(time.Since(start).Seconds())
	return ch, err
}
