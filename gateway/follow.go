package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/backoff"
)

// pollSlack is how much longer than the long-poll's wait a request may take
// before it is abandoned as a dead connection (a stream has heartbeats).
const pollSlack = 15 * time.Second

// follow keeps the GatewayMap followed and puts every new map in maps:
// one push stream (docs/internals.md "Push"), or long-polls with
// --long-poll or from a control that does not stream (said once in the
// log; a stream is tried again after the next failure, when control may
// have been upgraded). It resumes from the last version it saw after any
// error, backing off 100 ms doubling to 10 s with jitter
// (internal/backoff); it never polls on a timer.
func (a *agent) follow(ctx context.Context, maps *mailbox[*api.GatewayMap]) {
	var since uint64
	first := true
	bo := backoff.New(backoff.DefaultMin, backoff.DefaultMax)
	lastErr := ""
	stream := !a.cfg.LongPoll
	got := func(m *api.GatewayMap) error {
		a.cfg.Metrics.ControlAnswered(time.Now())
		if lastErr != "" {
			a.log.Info("control: gateway map reachable again", "version", m.Version)
			lastErr = ""
		}
		bo.Reset()
		// A different version (also a lower one: control's store was
		// reset) is news; the same one is a long-poll that timed out.
		if first || m.Version != since {
			maps.put(m)
		}
		first = false
		since = m.Version
		return nil
	}
	for ctx.Err() == nil {
		var err error
		if st, ok := a.cfg.Control.(gatewayMapStreamer); ok && stream {
			err = st.WatchGatewayMap(ctx, since, got)
			if errors.Is(err, api.ErrNoStream) {
				a.log.Warn("control does not stream the gateway map: long-polling instead")
				stream = false
				continue
			}
		} else {
			pctx, cancel := context.WithTimeout(ctx, a.cfg.PollWait+pollSlack)
			var m *api.GatewayMap
			m, err = a.cfg.Control.GatewayMap(pctx, since, a.cfg.PollWait)
			cancel()
			if err == nil {
				got(m)
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		stream = !a.cfg.LongPoll
		d := bo.Next()
		if msg := err.Error(); msg != lastErr {
			a.log.Warn("control: gateway map failed; retrying", "err", explainControlErr(err), "since", since, "retryIn", d.Round(time.Millisecond).String())
			lastErr = msg
		}
		sleep(ctx, d)
	}
}

// gatewayMapStreamer is a control that streams the gateway map (*api.Client).
type gatewayMapStreamer interface {
	WatchGatewayMap(ctx context.Context, since uint64, each func(*api.GatewayMap) error) error
}

// explainControlErr adds what to do to the errors an operator can fix.
func explainControlErr(err error) string {
	switch {
	case api.IsCode(err, api.CodeUnauthorized), api.IsCode(err, api.CodeForbidden):
		return err.Error() + ": check that --token-file holds this node's enrollment token"
	}
	return err.Error()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// mailbox holds the latest value put in it: a put replaces a value not yet
// taken, so a slow reader sees the newest map or report, never a backlog.
type mailbox[T any] struct{ ch chan T }

func newMailbox[T any]() *mailbox[T] { return &mailbox[T]{ch: make(chan T, 1)} }

func (m *mailbox[T]) put(v T) {
	for {
		select {
		case m.ch <- v:
			return
		default:
		}
		select {
		case <-m.ch:
		default:
		}
	}
}
