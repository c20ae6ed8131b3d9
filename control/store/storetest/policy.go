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

// testPolicy: no policy reads as ErrNotFound; a document replaces a lower
// version only (an equal or older one is ErrExists and changes nothing).
func testPolicy(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	view(t, s, func(r store.Reader) error {
		if _, err := r.Policy("rjwrn"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("policy before any = %v, want ErrNotFound", err)
		}
		return nil
	})
	p := model.Policy{AID: "rjwrn", Version: 4, Document: "# ours\nversion 4\n", SetBy: "a@x", SetAt: T0}
	update(t, s, func(w store.Writer) error { return w.PutPolicy(p) })
	for _, v := range []uint64{4, 3} {
		old := p
		old.Version, old.Document = v, fmt.Sprintf("version %d\n", v)
		_, err := s.Update(ctx, func(w store.Writer) error { return w.PutPolicy(old) })
		if !errors.Is(err, store.ErrExists) {
			t.Errorf("version %d over 4 = %v, want ErrExists", v, err)
		}
	}
	next := model.Policy{AID: "rjwrn", Version: 5, Document: "version 5\n", SetBy: "token ci", SetAt: T0.Add(time.Minute)}
	update(t, s, func(w store.Writer) error { return w.PutPolicy(next) })
	view(t, s, func(r store.Reader) error {
		got, err := r.Policy("rjwrn")
		if err != nil || got.Version != 5 || got.Document != next.Document || got.SetBy != "token ci" || !got.SetAt.Equal(next.SetAt) {
			t.Errorf("policy = %+v, %v; want %+v", got, err, next)
		}
		return nil
	})
}

// testGroups: groups are created empty, members added once (lowercased)
// and removed; a member of no group is refused, as is a second add.
func testGroups(t *testing.T, open func(*testing.T) store.Store) {
	s := open(t)
	seedBasics(t, s)
	update(t, s, func(w store.Writer) error {
		for _, g := range []string{"oncall", "staff"} {
			if err := w.PutGroup("rjwrn", g); err != nil {
				return err
			}
		}
		if err := w.PutGroup("rjwrn", "oncall"); !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("second group oncall: %v, want ErrExists", err)
		}
		if err := w.PutGroupMember("rjwrn", "nope", "a@x"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("member of a missing group: %v, want ErrNotFound", err)
		}
		for _, m := range [][2]string{{"oncall", "A@X"}, {"oncall", "b@x"}, {"staff", "a@x"}} {
			if err := w.PutGroupMember("rjwrn", m[0], m[1]); err != nil {
				return err
			}
		}
		if err := w.PutGroupMember("rjwrn", "oncall", "a@x"); !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("second add of a@x: %v, want ErrExists", err)
		}
		return nil
	})
	view(t, s, func(r store.Reader) error {
		gs, err := r.Groups("rjwrn")
		want := []model.Group{{AID: "rjwrn", Name: "oncall", Members: []string{"a@x", "b@x"}}, {AID: "rjwrn", Name: "staff", Members: []string{"a@x"}}}
		if err != nil || !slices.EqualFunc(gs, want, sameGroup) {
			t.Errorf("groups = %+v, %v; want %+v", gs, err, want)
		}
		if ug, err := r.UserGroups("rjwrn", "A@x"); err != nil || !slices.Equal(ug, []string{"oncall", "staff"}) {
			t.Errorf("groups of a@x = %v, %v", ug, err)
		}
		return nil
	})
	update(t, s, func(w store.Writer) error {
		if err := w.DeleteGroupMember("rjwrn", "staff", "A@X"); err != nil {
			return err
		}
		if err := w.DeleteGroupMember("rjwrn", "staff", "a@x"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("second removal: %v, want ErrNotFound", err)
		}
		return nil
	})
	view(t, s, func(r store.Reader) error {
		gs, err := r.Groups("rjwrn")
		if err != nil || len(gs) != 2 || len(gs[1].Members) != 0 {
			t.Errorf("groups after removal = %+v, %v (staff kept, empty)", gs, err)
		}
		if ug, err := r.UserGroups("rjwrn", "a@x"); err != nil || !slices.Equal(ug, []string{"oncall"}) {
			t.Errorf("groups of a@x after removal = %v, %v", ug, err)
		}
		return nil
	})
}

func sameGroup(a, b model.Group) bool {
	return a.AID == b.AID && a.Name == b.Name && slices.Equal(a.Members, b.Members)
}
