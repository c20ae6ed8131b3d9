package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// testRoles: operator is a role a user has in an account (issue 22). A
// user in two accounts who operates one of them reads back as operator of
// that one alone; a user operating both reads back as such; a role in an
// account the user is not in is refused and leaves nothing behind.
func testRoles(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	update(t, s, func(w store.Writer) error {
		for _, aid := range []string{"acme", "beta"} {
			if err := w.PutAccount(model.Account{AID: aid, Name: aid}); err != nil {
				return err
			}
		}
		for _, u := range []model.User{
			{Email: "Ops@acme.example", PasswordHash: "h", Accounts: []string{"beta", "acme"}, Operates: []string{"acme"}},
			{Email: "both@x.example", PasswordHash: "h", Accounts: []string{"acme", "beta"}, Operates: []string{"acme", "beta"}},
			{Email: "plain@x.example", PasswordHash: "h", Accounts: []string{"acme", "beta"}},
		} {
			if err := w.PutUser(u); err != nil {
				return err
			}
		}
		return nil
	})
	if _, err := s.Update(ctx, func(w store.Writer) error {
		return w.PutUser(model.User{Email: "x@x.example", PasswordHash: "h", Accounts: []string{"beta"}, Operates: []string{"acme"}})
	}); err == nil || errors.Is(err, store.ErrExists) {
		t.Errorf("operator of an account the user is not in: %v, want a refusal", err)
	}
	view(t, s, func(r store.Reader) error {
		for _, c := range []struct {
			email              string
			accounts, operates []string
		}{
			{"ops@ACME.example", []string{"acme", "beta"}, []string{"acme"}},
			{"both@x.example", []string{"acme", "beta"}, []string{"acme", "beta"}},
			{"plain@x.example", []string{"acme", "beta"}, nil},
		} {
			u, err := r.User(c.email)
			if err != nil || !slices.Equal(u.Accounts, c.accounts) || !slices.Equal(u.Operates, c.operates) {
				t.Errorf("user %s = %+v, %v; want accounts %v, operator of %v", c.email, u, err, c.accounts, c.operates)
			}
		}
		u, _ := r.User("ops@acme.example")
		if !u.OperatorOf("acme") || u.OperatorOf("beta") {
			t.Errorf("ops@acme: operator of acme %v, of beta %v; want true, false", u.OperatorOf("acme"), u.OperatorOf("beta"))
		}
		if _, err := r.User("x@x.example"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the refused user: %v, want ErrNotFound", err)
		}
		return nil
	})
}
