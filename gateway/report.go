package gateway

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/gateway/wgserver"
	"github.com/runos/vpn/internal/backoff"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Handshake watching: after the peers or the role change, the device is
// read this often while some peer has not handshaken since the change, for
// at most watchFor. A move's switch time is measured from these reports.
const (
	watchEvery = 20 * time.Millisecond
	watchFor   = 30 * time.Second
)

// reportTimeout bounds one report request.
const reportTimeout = 10 * time.Second

// watch is a window after a change in which new handshakes are looked for.
type watch struct {
	since time.Time // the change
	until time.Time // give up
}

func newWatch(now time.Time) watch { return watch{since: now, until: now.Add(watchFor)} }

// pending reports whether the watch should go on at now: time is left and
// some peer has had no handshake since the change.
func (w watch) pending(now time.Time, peers []wgserver.Peer, hs map[wgtypes.Key]time.Time) bool {
	if w.until.IsZero() || now.After(w.until) {
		return false
	}
	for _, p := range peers {
		if hs[p.PublicKey].Before(w.since) {
			return true
		}
	}
	return false
}

// newHandshakes returns the peers whose handshake is newer in cur than in prev.
func newHandshakes(prev, cur map[wgtypes.Key]time.Time) []wgtypes.Key {
	var out []wgtypes.Key
	for k, t := range cur {
		if !t.IsZero() && t.After(prev[k]) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b wgtypes.Key) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// reportInputs is everything a report is derived from.
type reportInputs struct {
	publicKey  wgtypes.Key
	version    string
	startedAt  time.Time
	publicIP   string
	mapVersion uint64 // the latest map processed (applied, or refused with errs)
	serve      *api.GatewayService
	state      *wgserver.State // nil when not serving
	errs       []error
	inside     *api.ClusterInside // nil: nothing declared
}

// buildReport derives the report. Listening is what the interface says, and
// only for the port the map asks for; MapVersion is the latest map this
// gateway has acted on, and Error says what of it could not be done.
func buildReport(in reportInputs) api.GatewayReport {
	r := api.GatewayReport{
		PublicKey:  in.publicKey.String(),
		Version:    in.version,
		PublicIP:   in.publicIP,
		MapVersion: in.mapVersion,
		StartedAt:  in.startedAt,
		Inside:     in.inside,
	}
	if in.serve != nil {
		r.ServiceID = in.serve.ServiceID
	}
	if st := in.state; st != nil {
		r.Listening = st.Listening && in.serve != nil && st.ListenPort == in.serve.Port
		if st.Listening {
			r.ListenPort = st.ListenPort
		}
		for k, t := range st.Handshakes {
			if !t.IsZero() {
				r.Handshakes = append(r.Handshakes, api.PeerHandshake{PublicKey: k.String(), At: t.UTC()})
			}
		}
		slices.SortFunc(r.Handshakes, func(a, b api.PeerHandshake) int { return strings.Compare(a.PublicKey, b.PublicKey) })
	}
	if err := errors.Join(in.errs...); err != nil {
		r.Error = err.Error()
	}
	return r
}

// sendReports posts every report put in box. A failed post is retried with
// backoff, unless a newer report arrives first: then that one is sent.
func (a *agent) sendReports(ctx context.Context, box *mailbox[api.GatewayReport]) {
	bo := backoff.New(backoff.DefaultMin, backoff.DefaultMax)
	lastErr := ""
	for {
		var r api.GatewayReport
		select {
		case r = <-box.ch:
		case <-ctx.Done():
			return
		}
		for {
			err := a.post(ctx, r)
			if err == nil {
				a.cfg.Metrics.ControlAnswered(time.Now())
				if lastErr != "" {
					a.log.Info("control: reports reachable again")
					lastErr = ""
				}
				bo.Reset()
				break
			}
			if ctx.Err() != nil {
				return
			}
			d := bo.Next()
			if msg := err.Error(); msg != lastErr {
				a.log.Warn("control: report failed; retrying", "err", explainControlErr(err), "retryIn", d.Round(time.Millisecond).String())
				lastErr = msg
			}
			t := time.NewTimer(d)
			select {
			case r = <-box.ch:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			t.Stop()
		}
	}
}

func (a *agent) post(ctx context.Context, r api.GatewayReport) error {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	return a.cfg.Control.GatewayReport(ctx, r)
}
