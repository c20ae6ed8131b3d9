package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/storetest"
)

// BenchmarkCommitSession is what a sign-in's commit costs (a session
// written, its topic touched), with the store's synchronous=FULL and, for
// comparison, the NORMAL it had before (docs/performance.md "Store
// durability").
func BenchmarkCommitSession(b *testing.B) {
	for _, mode := range []string{"FULL", "NORMAL"} {
		b.Run(mode, func(b *testing.B) {
			s, err := OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "control.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.w.Exec("PRAGMA synchronous=" + mode); err != nil { // the one writer connection
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.Update(ctx, func(w store.Writer) error {
				return w.PutUser(model.User{Email: "a@x", PasswordHash: "h"})
			}); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprint(i)
				if _, err := s.Update(ctx, func(w store.Writer) error {
					w.Touch(hub.Session("s" + id))
					return w.PutSession(model.Session{ID: "s" + id, TokenHash: "h" + id, User: "a@x", State: model.SessionLive, ExpiresAt: storetest.T0})
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
