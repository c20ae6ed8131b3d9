package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runos/vpn/control/store"
)

// lease takes a session-level advisory lock named name on a connection of
// its own, waiting (wait) while another replica holds it. The lock is the
// database's: it goes with the holder's connection, at once when its
// process dies. The holder checks its connection every leaseCheck and
// counts the lease lost when it fails.
func (d *pgDialect) lease(ctx context.Context, name string, wait bool) (store.Lease, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return nil, err
	}
	fn := "pg_try_advisory_lock"
	if wait {
		fn = "pg_advisory_lock"
	}
	got := true
	err = c.QueryRow(ctx, "SELECT "+fn+"(hashtextextended($1, 0))::text <> 'false'", "runos-lease:"+name).Scan(&got)
	if err != nil || !got {
		c.Close(context.Background())
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return nil, fmt.Errorf("lease %s: %w", name, d.classify(err))
		}
		return nil, store.ErrHeld
	}
	l := &pgLease{d: d, c: c, lost: make(chan struct{}), stop: make(chan struct{})}
	d.mu.Lock()
	d.leases[l] = true
	d.mu.Unlock()
	go l.hold()
	return l, nil
}

// leaseCheck is how often a holder checks that its lock's connection is
// alive: after a network fault the database frees the lock when it sees
// the connection die; the holder must stop acting by then.
const leaseCheck = time.Second

type pgLease struct {
	d    *pgDialect
	c    *pgx.Conn
	lost chan struct{}
	stop chan struct{}
	once sync.Once
}

func (l *pgLease) hold() {
	t := time.NewTicker(leaseCheck)
	defer t.Stop()
	defer func() {
		l.c.Close(context.Background())
		l.d.mu.Lock()
		delete(l.d.leases, l)
		l.d.mu.Unlock()
		close(l.lost)
	}()
	for {
		select {
		case <-l.stop:
			// Unlock before closing: the server frees a closed
			// connection's locks only once its backend has processed
			// the close, after Release has returned, so another
			// replica's TryLease right after could still find it held.
			ctx, cancel := context.WithTimeout(context.Background(), leaseCheck)
			_, _ = l.c.Exec(ctx, "SELECT pg_advisory_unlock_all()")
			cancel()
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), leaseCheck)
			err := l.c.Ping(ctx)
			cancel()
			if err != nil {
				return
			}
		}
	}
}

func (l *pgLease) Lost() <-chan struct{} { return l.lost }

func (l *pgLease) Release() {
	l.once.Do(func() { close(l.stop) })
	<-l.lost
}
