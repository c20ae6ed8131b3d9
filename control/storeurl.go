package control

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/sqlstore"
)

// Store URLs (--store, RUNOS_STORE): sqlite:PATH, the embedded default
// (what --db PATH gives), or postgres://user:password@host:port/db for
// several replicas.

// storeKind tells the two apart; the URL itself is never part of an error:
// it may hold a password.
func storeKind(u string) (kind, rest string, err error) {
	switch {
	case strings.HasPrefix(u, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(u, "sqlite:"), "//")
		if path == "" {
			return "", "", fmt.Errorf("--store sqlite: give the file, e.g. sqlite:/var/lib/runos-control/control.db")
		}
		return "sqlite", path, nil
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return "postgres", u, nil
	}
	scheme, _, _ := strings.Cut(u, ":")
	if len(scheme) > 20 || strings.ContainsAny(scheme, "/@") {
		scheme = "?"
	}
	return "", "", fmt.Errorf("--store: unknown kind %q: want sqlite:PATH or postgres://user:password@host:port/database", scheme)
}

// RedactStore is a store URL fit for a log line.
func RedactStore(u string) string {
	kind, rest, err := storeKind(u)
	switch {
	case err != nil:
		return "(invalid store URL)"
	case kind == "postgres":
		return sqlstore.Redact(rest)
	}
	return u
}

// opened is the store and, for PostgreSQL, what notify needs of it.
type opened struct {
	store.Store
	pg *sqlstore.Postgres // nil on SQLite
}

// Stats is the store's counts for metrics (both stores have them).
func (o opened) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	return o.Store.(store.StatsReader).Stats(ctx, now)
}

func openStore(ctx context.Context, cfg *Config, now func() time.Time, log *slog.Logger) (opened, error) {
	u := cfg.Store
	if u == "" {
		u = "sqlite:" + cfg.DB
	}
	kind, rest, err := storeKind(u)
	if err != nil {
		return opened{}, err
	}
	if kind == "sqlite" {
		st, err := sqlstore.OpenSQLite(ctx, rest, sqlstore.Options{Now: now})
		if err != nil {
			return opened{}, err
		}
		return opened{Store: st}, nil
	}
	// Replicas starting together, or before the database: retry a while.
	deadline := time.Now().Add(cfg.StoreWait)
	for {
		st, err := sqlstore.OpenPostgres(ctx, rest, sqlstore.Options{Now: now, AppName: cfg.ReplicaName})
		if err == nil {
			return opened{Store: st, pg: st}, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil || !isUnavailable(err) {
			return opened{}, err
		}
		log.Warn("store not reachable yet; retrying", "store", RedactStore(u), "err", err)
		select {
		case <-ctx.Done():
			return opened{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func isUnavailable(err error) bool {
	return err != nil && strings.Contains(err.Error(), store.ErrUnavailable.Error())
}
