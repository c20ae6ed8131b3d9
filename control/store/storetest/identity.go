package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// testIdentityGrants: one grant per user (email any case), replaced by the
// next sign-in, forgotten once; and whether any user has a password
// (a@x has; b@x, a user of the provider, has none).
func testIdentityGrants(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	view(t, s, func(r store.Reader) error {
		if gs, err := r.IdentityGrants(); err != nil || len(gs) != 0 {
			t.Errorf("grants before any = %v, %v", gs, err)
		}
		if ok, err := r.PasswordUsers(); err != nil || !ok {
			t.Errorf("password users with a@x = %v, %v; want true", ok, err)
		}
		return nil
	})
	first := model.IdentityGrant{Email: "B@x", Subject: "sub-b", SealedRefresh: []byte{1, 2, 3}, SignedInAt: T0}
	next := model.IdentityGrant{Email: "b@x", Subject: "sub-b", SealedRefresh: []byte{4, 5}, SignedInAt: T0.Add(1)}
	update(t, s, func(w store.Writer) error {
		if err := w.PutUser(model.User{Email: "b@x", Accounts: []string{"rjwrn"}}); err != nil {
			return err
		}
		if err := w.PutIdentityGrant(first); err != nil {
			return err
		}
		return w.PutIdentityGrant(next)
	})
	view(t, s, func(r store.Reader) error {
		gs, err := r.IdentityGrants()
		if err != nil || len(gs) != 1 || gs[0].Email != "b@x" || gs[0].Subject != "sub-b" ||
			!bytes.Equal(gs[0].SealedRefresh, next.SealedRefresh) || !gs[0].SignedInAt.Equal(next.SignedInAt) {
			t.Errorf("grants = %+v, %v; want the second of b@x alone", gs, err)
		}
		if g, err := r.IdentityGrant("B@X"); err != nil || !bytes.Equal(g.SealedRefresh, next.SealedRefresh) {
			t.Errorf("grant of B@X = %+v, %v", g, err)
		}
		if _, err := r.IdentityGrant("a@x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("grant of a password user = %v, want ErrNotFound", err)
		}
		return nil
	})
	update(t, s, func(w store.Writer) error {
		if err := w.DeleteIdentityGrant("B@X"); err != nil {
			return err
		}
		if err := w.DeleteIdentityGrant("b@x"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("second delete: %v, want ErrNotFound", err)
		}
		return nil
	})
	view(t, s, func(r store.Reader) error {
		if gs, err := r.IdentityGrants(); err != nil || len(gs) != 0 {
			t.Errorf("grants after the delete = %v, %v", gs, err)
		}
		return nil
	})
}
