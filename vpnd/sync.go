package vpnd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/backoff"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/store"
)

// syncSession is the conversation with control for one session token: it
// registers the device, joins the wanted clusters and follows the device
// map (a push stream, else long-polls). It ends when the session ends,
// lapses or is replaced.
type syncSession struct {
	ctl    control
	apiURL string
	cancel context.CancelFunc
	done   chan struct{}
}

// startSyncLocked starts the sync for the session in the prefs (replacing
// any running one). mu held.
func (d *daemon) startSyncLocked(ctl control) {
	d.stopSyncLocked()
	if !d.in.SignedIn() {
		return
	}
	ctx, cancel := context.WithCancel(d.ctx)
	s := &syncSession{ctl: ctl, apiURL: d.in.Prefs.APIURL, cancel: cancel, done: make(chan struct{})}
	d.sess = s
	go d.syncLoop(ctx, s)
}

// stopSyncLocked cancels the running sync; it ends on its own (it needs mu
// to finish, so this does not wait). mu held.
func (d *daemon) stopSyncLocked() {
	if d.sess != nil {
		d.sess.cancel()
		d.sess = nil
	}
}

// current runs f on the inputs only if s is still the session's sync: a
// replaced or stopped sync must not change anything.
func (d *daemon) current(s *syncSession, f func(in *state.Inputs)) bool {
	d.mu.Lock()
	if d.sess != s {
		d.mu.Unlock()
		return false
	}
	f(&d.in)
	d.updateLocked()
	d.mu.Unlock()
	d.kickRead()
	return true
}

func (d *daemon) syncLoop(ctx context.Context, s *syncSession) {
	defer close(s.done)
	b := backoff.New(d.backoffMin, d.backoffMax)
	var at resumePoint
	for ctx.Err() == nil {
		err := d.syncOnce(ctx, s, b, &at)
		if ctx.Err() != nil {
			return
		}
		if d.refused(s, err) {
			return
		}
		msg := controlErr(s.apiURL, err)
		d.log.Warn("sync with control", "err", msg)
		d.current(s, func(in *state.Inputs) {
			if in.ControlErr == "" {
				in.ControlErrSince = d.clock()
			}
			in.ControlErr = msg
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.Next()):
		}
	}
}

// refused handles control refusing the session's token: the session is
// over (expired), every cluster comes down, the wanted ones are kept.
func (d *daemon) refused(s *syncSession, err error) bool {
	if api.IsCode(err, api.CodeDeviceRevoked) {
		d.current(s, func(in *state.Inputs) { d.revokedLocked(err) })
		return true
	}
	if !api.IsCode(err, api.CodeSessionExpired) && !api.IsCode(err, api.CodeUnauthorized) {
		return false
	}
	d.log.Info("control ended the session", "reason", err.Error())
	d.current(s, func(in *state.Inputs) {
		in.SessionEnded = true
		in.SessionErr = "control ended the session: " + err.Error()
		in.ControlErr = ""
		d.stopSyncLocked()
	})
	return true
}

// resumePoint is where the last round's stream of the device map was: a
// round after a stream that delivered goes straight back to the stream
// from that version (issue 25: when a control replica dies, its devices
// come back to the survivors with one request each, not with the account's
// clusters and a join per cluster first). It stays so while reconnecting
// fails on the way (no control answers, which costs control nothing);
// an answer that is not the stream (a refusal, an older control) sends the
// next round through the whole sign-in again.
type resumePoint struct {
	since    uint64
	streamed bool
}

// syncOnce runs one round: device, clusters, joins, then the device map
// until an error: one push stream, or long-polls (--long-poll, or a control
// that does not stream). After a stream that delivered, only the stream
// (at).
func (d *daemon) syncOnce(ctx context.Context, s *syncSession, b *backoff.Backoff, at *resumePoint) error {
	id, err := d.ensureDevice(ctx, s)
	if err != nil {
		return err
	}
	st, streams := s.ctl.(mapStreamer)
	streams = streams && !d.longPoll
	if streams && at.streamed {
		err := d.followStream(ctx, s, st, id, at, d.mapGot(ctx, s, id, b, at))
		var refusal *api.Error
		if errors.As(err, &refusal) {
			at.streamed = false // control answered, but not with the stream
		}
		return err
	}
	cs, err := s.ctl.Clusters(ctx)
	if err != nil {
		return err
	}
	d.current(s, func(in *state.Inputs) { in.Accounts = cs })
	d.mu.Lock()
	wanted := slices.Clone(d.in.Prefs.Wanted)
	d.mu.Unlock()
	for _, cid := range wanted {
		if err := d.join(ctx, s, id, cid); err != nil {
			return err
		}
	}
	*at = resumePoint{}
	got := d.mapGot(ctx, s, id, b, at)
	if streams {
		err := d.followStream(ctx, s, st, id, at, got)
		if !errors.Is(err, api.ErrNoStream) {
			return err
		}
		// An older control: long-polls until this round ends (the next
		// round, after control restarts, tries a stream again).
		d.log.Warn("control does not stream the device map: long-polling instead", "control", s.apiURL)
	}
	for {
		pctx, cancel := context.WithTimeout(ctx, d.mapWait+15*time.Second)
		m, err := s.ctl.DeviceMap(pctx, id, at.since, d.mapWait)
		cancel()
		if err != nil {
			return d.mapFailed(s, err)
		}
		if err := got(m); err != nil {
			return err
		}
	}
}

// mapGot is what a round does with each new device map: applies it,
// remembers its version in at, joins again a wanted cluster the map lacks
// (joined before a restart that control forgot, or left elsewhere) and
// leaves a cluster the map lists that is not wanted here, once per map.
func (d *daemon) mapGot(ctx context.Context, s *syncSession, id string, b *backoff.Backoff, at *resumePoint) func(*api.DeviceMap) error {
	rejoined, left := map[string]uint64{}, map[string]uint64{}
	return func(m *api.DeviceMap) error {
		b.Reset()
		d.applyMap(s, m)
		at.since = m.Version
		if err := onceAt(rejoined, m.Version, d.missing(m), func(cid string) error { return d.join(ctx, s, id, cid) }); err != nil {
			return err
		}
		return onceAt(left, m.Version, d.unwanted(m), func(cid string) error { return d.leaveUnwanted(ctx, s, id, cid) })
	}
}

// onceAt does do for each of cids not yet done at this map version
// (recorded in done), stopping at the first error.
func onceAt(done map[string]uint64, version uint64, cids []string, do func(cid string) error) error {
	for _, cid := range cids {
		if done[cid] == version {
			continue
		}
		done[cid] = version
		if err := do(cid); err != nil {
			return err
		}
	}
	return nil
}

// unwanted returns the clusters m lists that are neither wanted here nor
// being joined, and that no pending leave or sign-out will leave: control
// holds the device in a cluster its daemon does not connect. A daemon
// that dies between control's answer to a join and the prefs' write
// wanting the cluster (the two overlap: actions.go connectAs) starts
// again so; left there, the gateway would serve the device a cluster it
// never connects until the session ends.
func (d *daemon) unwanted(m *api.DeviceMap) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, c := range m.Clusters {
		if slices.Contains(d.in.Prefs.Wanted, c.CID) || d.joining[c.CID] > 0 || d.leavesLocked(c.CID) {
			continue
		}
		out = append(out, c.CID)
	}
	return out
}

// leavesLocked reports whether a pending leave or sign-out covers cid. mu held.
func (d *daemon) leavesLocked(cid string) bool {
	return slices.ContainsFunc(d.in.Prefs.Pending, func(p store.Pending) bool { return slices.Contains(p.Clusters, cid) })
}

// leaveUnwanted leaves cid on control (see unwanted). A connect of cid
// that began meanwhile may have joined before this leave landed: then the
// cluster is joined again, so the last word is the connect's.
func (d *daemon) leaveUnwanted(ctx context.Context, s *syncSession, id, cid string) error {
	d.log.Info("leaving a cluster control lists but this device does not want", "cid", cid)
	if err := s.ctl.LeaveCluster(ctx, id, cid); err != nil {
		if !settled(err) || endsSession(err) {
			return err // the network, or the session: the round ends
		}
		d.log.Warn("leave", "cid", cid, "err", err)
		return nil
	}
	d.mu.Lock()
	again := slices.Contains(d.in.Prefs.Wanted, cid) || d.joining[cid] > 0
	d.mu.Unlock()
	if again {
		return d.join(ctx, s, id, cid)
	}
	return nil
}

// followStream follows the device map on one push stream from at.since;
// once it delivers, the next round may resume it (at.streamed).
func (d *daemon) followStream(ctx context.Context, s *syncSession, st mapStreamer, id string, at *resumePoint, got func(*api.DeviceMap) error) error {
	err := st.WatchDeviceMap(ctx, id, at.since, func(m *api.DeviceMap) error {
		at.streamed = true
		return got(m)
	})
	if errors.Is(err, api.ErrNoStream) {
		at.streamed = false
		return err
	}
	return d.mapFailed(s, err)
}

// mapStreamer is a control that streams the device map (*api.Client).
type mapStreamer interface {
	WatchDeviceMap(ctx context.Context, deviceID string, since uint64, each func(*api.DeviceMap) error) error
}

// mapFailed is what ends following the map: control forgot the device
// (registered again next round), or err is returned as it is.
func (d *daemon) mapFailed(s *syncSession, err error) error {
	if api.IsCode(err, api.CodeNotFound) {
		d.current(s, func(in *state.Inputs) { in.Prefs.DeviceID = ""; d.savePrefsLocked() })
	}
	return err
}

// ensureDevice registers the device's public key when the prefs hold no
// device id yet (registering the same key again returns the same device).
func (d *daemon) ensureDevice(ctx context.Context, s *syncSession) (string, error) {
	d.mu.Lock()
	id := d.in.Prefs.DeviceID
	d.mu.Unlock()
	if id != "" {
		return id, nil
	}
	dev, err := s.ctl.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: d.publicKey().String(), Name: d.hostname, OS: d.goos})
	if err != nil {
		return "", err
	}
	if dev.ID == "" {
		return "", errors.New("control registered the device without an id")
	}
	d.current(s, func(in *state.Inputs) { in.Prefs.DeviceID = dev.ID; d.savePrefsLocked() })
	return dev.ID, nil
}

// join asks control to join cid. Control's refusal is the cluster's error
// (the sync goes on); a session refusal or a network failure is returned.
func (d *daemon) join(ctx context.Context, s *syncSession, id, cid string) error {
	_, err := s.ctl.JoinCluster(ctx, id, cid)
	var ae *api.Error
	switch {
	case err == nil:
		d.current(s, func(in *state.Inputs) { delete(in.JoinErrs, cid) })
		return nil
	case endsSession(err):
		return err
	case errors.As(err, &ae) && ae.Status != http.StatusServiceUnavailable && ae.Status < 500:
		msg := fmt.Sprintf("control refused to join %s: %v", cid, err)
		d.log.Warn("join", "cid", cid, "err", err)
		d.current(s, func(in *state.Inputs) { setJoinErr(in, cid, msg) })
		return nil
	}
	return err
}

// endsSession reports whether control's answer ends the session here (an
// expired or unknown token, a revoked device): what refused does.
func endsSession(err error) bool {
	return api.IsCode(err, api.CodeSessionExpired) || api.IsCode(err, api.CodeUnauthorized) || api.IsCode(err, api.CodeDeviceRevoked)
}

func setJoinErr(in *state.Inputs, cid, msg string) {
	if in.JoinErrs == nil {
		in.JoinErrs = map[string]string{}
	}
	in.JoinErrs[cid] = msg
}

// applyMap takes a device map from control, never going back to an older
// version (an answer overtaken by a newer one is dropped).
func (d *daemon) applyMap(s *syncSession, m *api.DeviceMap) {
	d.current(s, func(in *state.Inputs) {
		if in.Map != nil && !in.MapKept && m.Version < in.Map.Version {
			return // the kept map is replaced by whatever control sends
		}
		if old := in.Map; old == nil || old.Version != m.Version {
			d.logMoves(old, m)
			d.logRefusalsLocked(m)
		}
		if in.MapKept {
			d.log.Info("control answers: its map replaces the kept configuration", "version", m.Version)
		}
		in.Map, in.MapKept, in.MapReceivedAt = m, false, d.clock()
		if in.ControlErr != "" && d.counts != nil {
			d.counts.control++ // control answers again after a failure
		}
		in.ControlErr = ""
		if e := m.Session.ExpiresAt; !e.IsZero() && !e.Equal(in.Prefs.ExpiresAt) {
			in.Prefs.ExpiresAt = e // control is the authority on the session's end
			d.savePrefsLocked()
		}
	})
}

// logRefusalsLocked logs what the daemon's trust refused of control's map,
// each time that changes (the status shows it as long as it lasts). mu held.
func (d *daemon) logRefusalsLocked(m *api.DeviceMap) {
	r := state.Refusals(m, d.in.Trust)
	if slices.Equal(r, d.refusals) {
		return
	}
	d.refusals = r
	for _, msg := range r {
		d.log.Warn("refused what control sent", "control", d.in.Prefs.APIURL, "err", msg)
	}
}

// logMoves logs a cluster's server changing node or key: a move.
func (d *daemon) logMoves(old, m *api.DeviceMap) {
	if old == nil {
		return
	}
	for _, c := range m.Clusters {
		for _, o := range old.Clusters {
			if o.CID == c.CID && (o.VPN.PublicKey != c.VPN.PublicKey || o.VPN.Endpoint != c.VPN.Endpoint) {
				d.log.Info("cluster's VPN server moved", "cid", c.CID, "from", o.VPN.NodeID, "to", c.VPN.NodeID, "endpoint", c.VPN.Endpoint)
			}
		}
	}
}

// missing returns the wanted clusters m does not list and that have no join error.
func (d *daemon) missing(m *api.DeviceMap) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, cid := range d.in.Prefs.Wanted {
		if d.in.JoinErrs[cid] != "" {
			continue
		}
		if !slices.ContainsFunc(m.Clusters, func(c api.ClusterConfig) bool { return c.CID == cid }) {
			out = append(out, cid)
		}
	}
	return out
}

// controlErr says what went wrong talking to control, in words for status.
func controlErr(apiURL string, err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return "control: " + ae.Error()
	}
	return fmt.Sprintf("control %s unreachable: %v", apiURL, unwrapURL(err))
}
