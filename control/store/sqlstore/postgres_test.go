package sqlstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/storetest"
	"github.com/runos/vpn/internal/pgtest"
)

// PostgreSQL's own: the suite against a real server started for these
// tests, migrations by several replicas at once, a server that goes away
// and comes back, leases, and URLs that hold passwords.

func openURL(t *testing.T, url string) *Postgres {
	t.Helper()
	s, err := OpenPostgres(context.Background(), url, Options{Now: func() time.Time { return storetest.T0.Add(-4 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgresConformance(t *testing.T) {
	pg := pgtest.Start(t)
	storetest.Run(t, func(t *testing.T) func(*testing.T) store.Store {
		url := pg.NewDatabase(t)
		return func(t *testing.T) store.Store { return openURL(t, url) }
	}, true)
}

// Replicas starting together migrate once: the advisory lock makes the
// others wait and then find nothing to do.
func TestPostgresMigrationsOnceUnderLock(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	var wg sync.WaitGroup
	stores := make([]*Postgres, 4)
	for i := range stores {
		wg.Go(func() {
			s, err := OpenPostgres(context.Background(), url, Options{})
			if err != nil {
				t.Error(err)
				return
			}
			stores[i] = s
		})
	}
	wg.Wait()
	for _, s := range stores {
		if s == nil {
			t.FailNow()
		}
		defer s.Close()
	}
	var n int
	if err := stores[0].w.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil || n != len(pgMigrations)-1 {
		t.Fatalf("schema_migrations rows = %d (%v), want %d", n, err, len(pgMigrations)-1)
	}
	// A database newer than the binary is refused.
	if _, err := stores[0].w.Exec("INSERT INTO schema_migrations VALUES ($1, 0)", len(pgMigrations)-1+1); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPostgres(context.Background(), url, Options{}); err == nil || !strings.Contains(err.Error(), "newer than this runos-control") {
		t.Fatalf("newer schema: %v", err)
	}
}

// A server that stops gives ErrUnavailable, fast; when it is back the same
// store works again without being reopened.
func TestPostgresServerDownAndBack(t *testing.T) {
	pg := pgtest.Start(t)
	s := openURL(t, pg.NewDatabase(t))
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	pg.Stop()
	for name, op := range map[string]func(context.Context) error{
		"view": func(ctx context.Context) error {
			return s.View(ctx, func(r store.Reader) error { _, err := r.GlobalVersion(); return err })
		},
		"update": func(ctx context.Context) error {
			_, err := s.Update(ctx, func(w store.Writer) error { w.Touch("x"); return nil })
			return err
		},
		"ping":   s.Ping,
		"grants": func(ctx context.Context) error { _, err := s.Grants().DeviceCodeByHash(ctx, "h"); return err },
	} {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := op(cctx)
		cancel()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable", name, err)
		}
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, func(w store.Writer) error { w.Touch("x"); return nil }); err != nil {
		t.Fatalf("after the server came back: %v", err)
	}
}

// A lease's holder whose connection is cut (its process died, a network
// fault) loses it, and a waiting replica takes it at once.
func TestPostgresLeaseGoesWithTheConnection(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	a, b := openURL(t, url), openURL(t, url)
	ctx := context.Background()
	la, err := a.Lease(ctx, "timers")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := b.Lease(ctx, "timers")
		if err == nil {
			defer l.Release()
		}
		got <- err
	}()
	// Cut the holder's connection from the server's side.
	if _, err := b.w.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	<-la.Lost()
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://runos:s3cret@db:5432/runos":            "postgres://runos:xxxxx@db:5432/runos",
		"postgres://db/runos?password=s3cret&sslmode=none": "postgres://db/runos?password=xxxxx&sslmode=none",
		"postgres://db/runos":                              "postgres://db/runos",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	_, err := OpenPostgres(context.Background(), "postgres://runos:s3cret@db:notaport/runos", Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a bad URL's error: %v (must not hold the password)", err)
	}
	_, err = OpenPostgres(context.Background(), "postgres://runos:s3cret@127.0.0.1:1/runos?connect_timeout=2", Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret") || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("an unreachable server's error: %v (want unavailable, without the password)", err)
	}
}
