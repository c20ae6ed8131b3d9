package vpnd

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/backoff"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/store"
)

// Changes control must hear even when it is unreachable at the time: a
// sign-out (`runos vpn down`) and a cluster's leave (`runos vpn
// disconnect`). Both take effect here at once; what control did not hear is
// recorded in the prefs (store.Pending, with the session's token kept for
// that purpose only) and sent again with backoff until control answers, or
// until the session would have lapsed anyway (control then acts on its own).
// Meanwhile status warns ("sign-out pending at control").

// pendingTry bounds one attempt: control answers these in milliseconds.
const pendingTry = 5 * time.Second

// sendPending tells control about p once. done is true when control heard
// it or nothing is left to tell it (the session is already over, the device
// is not in the cluster, or control refused in a way retrying cannot
// change); otherwise err says why it must be retried.
func (d *daemon) sendPending(ctx context.Context, p store.Pending, wanted []string) (done bool, err error) {
	ctl, err := d.newControl(p.APIURL, p.Token)
	if err != nil {
		return true, err // a URL that cannot work will not start working
	}
	ctx, cancel := context.WithTimeout(ctx, pendingTry)
	defer cancel()
	for _, cid := range p.Clusters {
		if p.Kind == store.PendingSignOut && slices.Contains(wanted, cid) {
			continue // connected again since, under a new session: not ours to leave
		}
		if p.DeviceID == "" {
			break
		}
		if err := ctl.LeaveCluster(ctx, p.DeviceID, cid); err != nil && !settled(err) {
			return false, err
		}
	}
	if p.Kind == store.PendingSignOut {
		if err := ctl.EndSession(ctx); err != nil && !settled(err) {
			return false, err
		}
	}
	return true, nil
}

// settled says whether control's answer makes retrying pointless: the
// session is over already, the device or cluster is gone, or control
// refused for good (any 4xx but a throttle).
func settled(err error) bool {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return false // the network: retry
	}
	return ae.Status != http.StatusTooManyRequests && ae.Status >= 400 && ae.Status < 500
}

// addPendingLocked records p (replacing one for the same thing) and wakes
// the retries. mu held.
func (d *daemon) addPendingLocked(p store.Pending, err error) {
	in := &d.in
	in.Prefs.Pending = slices.DeleteFunc(in.Prefs.Pending, func(o store.Pending) bool { return o.Key() == p.Key() })
	if p.Kind == store.PendingSignOut {
		// Ending the session takes the device out of every cluster of it.
		in.Prefs.Pending = slices.DeleteFunc(in.Prefs.Pending, func(o store.Pending) bool {
			return o.Kind == store.PendingLeave && o.Token == p.Token
		})
	}
	in.Prefs.Pending = append(in.Prefs.Pending, p)
	d.savePrefsLocked()
	setPendingErr(in, p, controlErr(p.APIURL, err))
	d.log.Warn(p.ID()+" pending at control; retrying until it answers", "err", controlErr(p.APIURL, err))
	kick(d.wakePending)
}

// dropPendingLeave forgets a pending leave of cid before it is connected
// again: control hears the join instead. It waits for a send in flight
// (sendingMu), so no leave sent before reaches control after the join.
func (d *daemon) dropPendingLeave(cid string) {
	d.sendingMu.Lock()
	defer d.sendingMu.Unlock()
	d.change(func(in *state.Inputs) {
		n := len(in.Prefs.Pending)
		in.Prefs.Pending = slices.DeleteFunc(in.Prefs.Pending, func(o store.Pending) bool {
			return o.Kind == store.PendingLeave && slices.Contains(o.Clusters, cid)
		})
		if len(in.Prefs.Pending) != n {
			d.savePrefsLocked()
		}
	})
}

// stillPending reports whether p is still to be sent.
func (d *daemon) stillPending(p store.Pending) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.ContainsFunc(d.in.Prefs.Pending, func(o store.Pending) bool { return o.Key() == p.Key() })
}

func setPendingErr(in *state.Inputs, p store.Pending, msg string) {
	if in.PendingErrs == nil {
		in.PendingErrs = map[string]string{}
	}
	in.PendingErrs[p.Key()] = msg
}

// pendingLoop sends what is pending until control has heard all of it:
// one pass over the list, then a backoff wait (or a wake when something is
// added); a pass where everything went through resets the backoff.
func (d *daemon) pendingLoop(ctx context.Context) {
	b := backoff.New(d.backoffMin, d.backoffMax)
	for {
		d.mu.Lock()
		ps := slices.Clone(d.in.Prefs.Pending)
		var wanted []string
		if d.in.SignedIn() {
			wanted = slices.Clone(d.in.Prefs.Wanted)
		}
		d.mu.Unlock()
		retry := false
		for _, p := range ps {
			if ctx.Err() != nil {
				return
			}
			if !p.ExpiresAt.IsZero() && !d.clock().Before(p.ExpiresAt) {
				d.log.Info(p.ID()+": the session lapsed at control meanwhile; nothing left to send", "since", p.Since)
				d.finishPending(p)
				continue
			}
			d.sendingMu.Lock()
			if !d.stillPending(p) {
				d.sendingMu.Unlock()
				continue
			}
			done, err := d.sendPending(ctx, p, wanted)
			d.sendingMu.Unlock()
			if done {
				if err != nil {
					d.log.Warn(p.ID()+": control cannot take it; dropped", "err", err)
				} else {
					d.log.Info(p.ID()+": control heard it", "pendingFor", d.clock().Sub(p.Since).Round(time.Millisecond).String())
				}
				d.finishPending(p)
				continue
			}
			retry = true
			d.change(func(in *state.Inputs) { setPendingErr(in, p, controlErr(p.APIURL, err)) })
		}
		var wait <-chan time.Time
		if retry {
			wait = time.After(b.Next())
		} else {
			b.Reset()
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wakePending:
		case <-wait:
		}
	}
}

// finishPending forgets p once it is sent or moot.
func (d *daemon) finishPending(p store.Pending) {
	d.change(func(in *state.Inputs) {
		in.Prefs.Pending = slices.DeleteFunc(in.Prefs.Pending, func(o store.Pending) bool { return o.Key() == p.Key() })
		delete(in.PendingErrs, p.Key())
		d.savePrefsLocked()
	})
}
