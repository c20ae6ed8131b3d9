package cli

import (
	"context"
	"errors"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/backoff"
)

// pollWait is how long one long-poll of a service or move is held (a
// control older than push streams).
const pollWait = 30 * time.Second

// errFollowed ends a stream once what is followed is over.
var errFollowed = errors.New("followed to the end")

// followDoc follows one of control's documents (a service, a move) from
// since until each says it is over: one push stream while control offers
// one, long-polls from a control older than streams. A failure worth
// repeating (the network, an unavailable control) is retried after
// backoff (100 ms doubling to 10 s) from the last version seen; anything
// else, or the end of ctx, is returned.
func followDoc[T any](ctx context.Context, since uint64, version func(*T) uint64,
	stream func(ctx context.Context, since uint64, each func(*T) error) error,
	poll func(ctx context.Context, since uint64) (*T, error),
	each func(*T) (over bool)) error {
	var b backoff.Backoff
	streams := true
	for {
		var err error
		if streams {
			err = stream(ctx, since, func(d *T) error {
				b.Reset()
				since = version(d)
				if each(d) {
					return errFollowed
				}
				return nil
			})
			switch {
			case errors.Is(err, errFollowed):
				return nil
			case errors.Is(err, api.ErrNoStream):
				streams = false
				continue
			}
		} else {
			var d *T
			if d, err = poll(ctx, since); err == nil {
				b.Reset()
				since = version(d)
				if each(d) {
					return nil
				}
				continue
			}
		}
		if ctx.Err() != nil || !retryable(err) {
			return err
		}
		if werr := b.Wait(ctx); werr != nil {
			return err
		}
	}
}
