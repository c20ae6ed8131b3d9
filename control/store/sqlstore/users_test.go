package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/internal/pgtest"
)

// Users reads an account's users, with every account and role of theirs,
// in one statement however many there are (it was one for the emails and
// two per user), on either dialect.

func TestSQLiteUsersInOneStatement(t *testing.T) {
	checkUsersInOneStatement(t, openTestSQLite(t, filepath.Join(t.TempDir(), "control.db")))
}

func TestPostgresUsersInOneStatement(t *testing.T) {
	checkUsersInOneStatement(t, openURL(t, pgtest.Start(t).NewDatabase(t)).Store)
}

// counting counts the statements run on a querier.
type counting struct {
	querier
	n int
}

func (c *counting) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c.n++
	return c.querier.ExecContext(ctx, query, args...)
}

func (c *counting) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.n++
	return c.querier.QueryContext(ctx, query, args...)
}

func (c *counting) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c.n++
	return c.querier.QueryRowContext(ctx, query, args...)
}

func checkUsersInOneStatement(t *testing.T, s *Store) {
	ctx := context.Background()
	_, err := s.Update(ctx, func(w store.Writer) error {
		for _, aid := range []string{"k2", "ky3"} {
			if err := w.PutAccount(model.Account{AID: aid}); err != nil {
				return err
			}
		}
		return w.PutUser(model.User{Email: "Both@x", PasswordHash: "h", Accounts: []string{"k2", "ky3"}, Operates: []string{"ky3"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 20; n *= 4 {
		_, err := s.Update(ctx, func(w store.Writer) error {
			for i := range n {
				if err := w.PutUser(model.User{Email: fmt.Sprintf("u%d.%d@x", n, i), Accounts: []string{"ky3"}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sqlTx, err := s.r.BeginTx(ctx, s.d.readOnly())
		if err != nil {
			t.Fatal(err)
		}
		q := &counting{querier: sqlTx}
		us, err := (&tx{conn: s.on(ctx, q)}).Users("ky3")
		sqlTx.Rollback()
		if err != nil {
			t.Fatal(err)
		}
		if q.n != 1 {
			t.Errorf("Users with %d users ran %d statements, want 1", len(us), q.n)
		}
		i := slices.IndexFunc(us, func(u model.User) bool { return u.Email == "Both@x" })
		if i < 0 || !slices.Equal(us[i].Accounts, []string{"k2", "ky3"}) || !slices.Equal(us[i].Operates, []string{"ky3"}) || us[i].PasswordHash != "h" {
			t.Fatalf("Users = %+v; want Both@x in k2 and ky3, operator of ky3", us)
		}
	}
	if us, err := viewUsers(s, "k2"); err != nil || len(us) != 1 || !slices.Equal(us[0].Accounts, []string{"k2", "ky3"}) {
		t.Errorf("users of k2 = %+v, %v", us, err)
	}
	if us, err := viewUsers(s, "none"); err != nil || us == nil || len(us) != 0 {
		t.Errorf("users of no account = %#v, %v; want empty", us, err)
	}
}

func viewUsers(s *Store, aid string) (us []model.User, err error) {
	err = s.View(context.Background(), func(r store.Reader) error {
		us, err = r.Users(aid)
		return err
	})
	return us, err
}
