package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// testRemoveUser: a user taken out of an account loses their role and
// groups there and nothing elsewhere; a user left in no account keeps
// their record and sessions but no password; removing a user not in the
// account is ErrNotFound and changes nothing; AddUserToAccount puts them
// back with no role.
func testRemoveUser(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s) // a@x in rjwrn, with a password
	update(t, s, func(w store.Writer) error {
		if err := w.PutAccount(model.Account{AID: "other", Name: "O", OperatorTokenHash: "op2"}); err != nil {
			return err
		}
		if err := w.PutUser(model.User{Email: "Both@x", PasswordHash: "$2a$b", Accounts: []string{"other", "rjwrn"}, Operates: []string{"rjwrn"}}); err != nil {
			return err
		}
		for _, aid := range []string{"rjwrn", "other"} {
			if err := w.PutGroup(aid, "oncall"); err != nil {
				return err
			}
			for _, e := range []string{"a@x", "both@x"} {
				if err := w.PutGroupMember(aid, "oncall", e); err != nil {
					return err
				}
			}
		}
		return w.PutSession(model.Session{ID: "s1", TokenHash: "t1", User: "a@x", State: model.SessionLive, CreatedAt: T0, ExpiresAt: T0.Add(time.Hour)})
	})
	view(t, s, func(r store.Reader) error {
		us, err := r.Users("rjwrn")
		if err != nil || len(us) != 2 || us[0].Email != "Both@x" || us[1].Email != "a@x" || !us[0].OperatorOf("rjwrn") {
			t.Errorf("users of rjwrn = %+v, %v", us, err)
		}
		return nil
	})
	for _, c := range []struct{ aid, email string }{{"rjwrn", "nobody@x"}, {"other", "a@x"}} {
		_, err := s.Update(ctx, func(w store.Writer) error { return w.RemoveUserFromAccount(c.aid, c.email) })
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("remove %s from %s = %v, want ErrNotFound", c.email, c.aid, err)
		}
	}
	update(t, s, func(w store.Writer) error {
		if err := w.RemoveUserFromAccount("rjwrn", "BOTH@x"); err != nil {
			return err
		}
		return w.RemoveUserFromAccount("rjwrn", "A@X")
	})
	view(t, s, func(r store.Reader) error {
		both, err := r.User("both@x")
		if err != nil || !slices.Equal(both.Accounts, []string{"other"}) || len(both.Operates) != 0 || both.PasswordHash != "$2a$b" {
			t.Errorf("both@x after leaving rjwrn = %+v, %v; want in other only, password kept", both, err)
		}
		a, err := r.User("a@x")
		if err != nil || len(a.Accounts) != 0 || a.PasswordHash != "" {
			t.Errorf("a@x after leaving its only account = %+v, %v; want kept, no account, no password", a, err)
		}
		if sess, err := r.Session("s1"); err != nil || sess.User != "a@x" {
			t.Errorf("a@x's session after the removal = %+v, %v; want kept", sess, err)
		}
		if us, err := r.Users("rjwrn"); err != nil || len(us) != 0 {
			t.Errorf("users of rjwrn = %+v, %v; want none", us, err)
		}
		gs, err := r.Groups("rjwrn")
		if err != nil || len(gs) != 1 || len(gs[0].Members) != 0 {
			t.Errorf("groups of rjwrn = %+v, %v; want oncall, empty", gs, err)
		}
		if ug, err := r.UserGroups("other", "both@x"); err != nil || !slices.Equal(ug, []string{"oncall"}) {
			t.Errorf("both@x's groups in other = %v, %v; want kept", ug, err)
		}
		return nil
	})
	update(t, s, func(w store.Writer) error {
		if err := w.AddUserToAccount("rjwrn", "A@x"); err != nil {
			return err
		}
		if err := w.AddUserToAccount("rjwrn", "a@x"); !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("second add: %v, want ErrExists", err)
		}
		if err := w.AddUserToAccount("rjwrn", "nobody@x"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("add of no user: %v, want ErrNotFound", err)
		}
		return nil
	})
	view(t, s, func(r store.Reader) error {
		if a, err := r.User("a@x"); err != nil || !slices.Equal(a.Accounts, []string{"rjwrn"}) || len(a.Operates) != 0 {
			t.Errorf("a@x added back = %+v, %v", a, err)
		}
		return nil
	})
}
