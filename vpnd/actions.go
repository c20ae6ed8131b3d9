package vpnd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/fault"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/store"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// apiError is an answer of the local API that is not a success.
type apiError struct {
	status int
	e      api.Error
}

func (e *apiError) Error() string { return e.e.Error() }

func errf(status int, code, hint, format string, a ...any) *apiError {
	return &apiError{status: status, e: api.Error{Code: code, Message: fmt.Sprintf(format, a...), Hint: hint}}
}

// fromControl turns control's answer into the local API's: control's own
// refusals pass through with their code; failures to reach it say so.
func fromControl(apiURL, what string, err error) *apiError {
	var ae *api.Error
	if errors.As(err, &ae) {
		st := ae.Status
		if st == 0 {
			st = http.StatusBadGateway
		}
		return &apiError{status: st, e: api.Error{Code: ae.Code, Message: what + ": " + ae.Message, Hint: ae.Hint}}
	}
	return errf(http.StatusBadGateway, localapi.CodeControl, "check the network, or the api URL with: runos config get api-url",
		"%s: control %s unreachable: %v", what, apiURL, unwrapURL(err))
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// savePrefsLocked has the prefs written with the next plan (the applier
// writes them, outside mu). mu held.
func (d *daemon) savePrefsLocked() {
	d.prefsDirty = true
}

// answer is an action's answer: the status once what the action decided
// is applied (prefs on disk, tunnel and DNS as far as the plan of now
// goes: a disconnect answers with the cluster's names public again). Only
// the caller waits; status and the other callers do not.
func (d *daemon) answer(ctx context.Context) (localapi.Status, *apiError) {
	if err := d.settle(ctx); err != nil {
		return localapi.Status{}, errf(http.StatusInternalServerError, "internal", "", "%v", err)
	}
	return d.Status(), nil
}

// setSession takes over a session the CLI or desktop signed in: verify the
// token with control, register the device (public key only), then start
// syncing, which joins the clusters the user wanted. refuse, when not nil,
// is the caller's refusal to give if the session is of another control
// than the one the daemon follows (checked before control hears of it, and
// again when the session is recorded).
func (d *daemon) setSession(ctx context.Context, req localapi.SessionRequest, refuse func(from, to string) *apiError) (localapi.Status, *apiError) {
	if e := d.checkControlChange(req.APIURL, refuse); e != nil {
		return localapi.Status{}, e
	}
	ctl, err := d.newControl(req.APIURL, req.AccessToken)
	if err != nil {
		return localapi.Status{}, errf(http.StatusBadRequest, localapi.CodeInvalid, "", "session: %v", err)
	}
	me, err := ctl.Me(ctx)
	if err != nil {
		return localapi.Status{}, fromControl(req.APIURL, "control refused the session", err)
	}
	exp := me.ExpiresAt
	if exp.IsZero() {
		exp = req.ExpiresAt
	}
	if exp.IsZero() {
		return localapi.Status{}, errf(http.StatusBadRequest, localapi.CodeInvalid, "", "session: no expiry from control or in the request")
	}
	if !d.clock().Before(exp) {
		return localapi.Status{}, errf(http.StatusBadRequest, localapi.CodeInvalid, "run `runos vpn up` to sign in again",
			"the session already expired at %s", exp.UTC().Format(time.RFC3339))
	}
	var dev *api.Device
	for attempt := 1; ; attempt++ {
		var pub wgtypes.Key
		dev, pub, err = d.register(ctx, ctl)
		if err != nil {
			return localapi.Status{}, fromControl(req.APIURL, "register the device", err)
		}
		if dev.ID == "" {
			return localapi.Status{}, errf(http.StatusBadGateway, localapi.CodeControl, "", "control registered the device without an id")
		}
		d.mu.Lock()
		if d.public == pub {
			break // mu held
		}
		// The old session's sync learned of a revocation meanwhile and
		// replaced the key: register the one the tunnel now has.
		d.mu.Unlock()
		if attempt == 3 {
			return localapi.Status{}, errf(http.StatusInternalServerError, "internal", "try again",
				"the device key kept changing while it was being registered")
		}
	}

	prev := d.in.Prefs
	if refuse != nil && prev.Control != req.APIURL {
		d.mu.Unlock()
		return localapi.Status{}, refuse(prev.Control, req.APIURL)
	}
	p := store.Prefs{Control: req.APIURL, APIURL: req.APIURL, AccessToken: req.AccessToken, ExpiresAt: exp, User: me.User, DeviceID: dev.ID,
		Pending: prev.Pending}
	if prev.APIURL == p.APIURL && prev.User == p.User {
		p.Wanted = prev.Wanted // the same user again: restore what they wanted
	}
	d.in.Prefs = p
	d.savePrefsLocked()
	d.in.SessionEnded, d.in.SessionErr, d.in.ControlErr = false, "", ""
	d.in.Map, d.in.Accounts, d.in.JoinErrs = nil, nil, nil
	d.startSyncLocked(ctl)
	d.updateLocked()
	d.mu.Unlock()
	d.kickRead()
	// The answer waits for the session to be on disk (a restart must
	// resume it) and the plan of a session with no map yet applied.
	if err := d.settle(ctx); err != nil {
		return localapi.Status{}, errf(http.StatusInternalServerError, "internal", "", "save the session: %v", err)
	}
	st := d.Status()
	d.log.Info("session handed over", "user", me.User, "expiresAt", exp.UTC().Format(time.RFC3339), "device", dev.ID, "wanted", p.Wanted)
	return st, nil
}

// register registers the device's public key with control; a key control
// refuses as revoked (revoked while the daemon was not listening, or not
// replaced then) is replaced by a new one, registered once more.
// It returns the key it registered.
func (d *daemon) register(ctx context.Context, ctl control) (*api.Device, wgtypes.Key, error) {
	pub := d.publicKey()
	dev, err := ctl.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: pub.String(), Name: d.hostname, OS: d.goos})
	if !api.IsCode(err, api.CodeDeviceRevoked) {
		return dev, pub, err
	}
	d.log.Info("control refuses this device's key: making a new one", "reason", err.Error())
	d.mu.Lock()
	ok := d.newKeyLocked()
	pub = d.public
	d.mu.Unlock()
	if !ok {
		return nil, pub, err
	}
	dev, err = ctl.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: pub.String(), Name: d.hostname, OS: d.goos})
	return dev, pub, err
}

// checkControlChange refuses (and logs) a session of a control other than
// the one followed, for a caller refuse stands for.
func (d *daemon) checkControlChange(to string, refuse func(from, to string) *apiError) *apiError {
	if refuse == nil {
		return nil
	}
	d.mu.Lock()
	from := d.in.Prefs.Control
	d.mu.Unlock()
	if from == to {
		return nil
	}
	d.log.Warn("refused a change of control: the caller may not change it", "from", from, "to", to)
	return refuse(from, to)
}

// signedIn returns the running sync and device id, or the refusal to give
// when there is no live session.
func (d *daemon) signedIn() (*syncSession, string, *apiError) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.in.Now = d.clock()
	switch {
	case !d.in.Prefs.RevokedAt.IsZero():
		return nil, "", errf(http.StatusConflict, localapi.CodeSignedOut, "",
			"this device was removed from RunOS: run `runos vpn up` to sign in again with a new key")
	case d.in.Prefs.AccessToken == "":
		return nil, "", errf(http.StatusConflict, localapi.CodeSignedOut, "", "not signed in: run `runos vpn up`")
	case !d.in.SignedIn():
		return nil, "", errf(http.StatusConflict, localapi.CodeSignedOut, "", "the session expired: run `runos vpn up` to sign in again")
	case d.sess == nil:
		return nil, "", errf(http.StatusServiceUnavailable, localapi.CodeControl, "", "not talking to control yet: try again in a moment")
	}
	return d.sess, d.in.Prefs.DeviceID, nil
}

// connect joins cid and answers once control accepted the join; the peer
// is configured when the map stream brings the cluster (status shows it
// connecting until then).
func (d *daemon) connect(ctx context.Context, cid string) (localapi.Status, *apiError) {
	return d.connectAs(ctx, cid, "")
}

// connectAs is connect that also records def as the default cluster
// (issue 21; "" keeps the one recorded).
func (d *daemon) connectAs(ctx context.Context, cid, def string) (localapi.Status, *apiError) {
	if err := api.CheckCID(cid); err != nil {
		return localapi.Status{}, errf(http.StatusBadRequest, localapi.CodeInvalid, "", "%v", err)
	}
	s, id, aerr := d.signedIn()
	if aerr != nil {
		return localapi.Status{}, aerr
	}
	if id == "" {
		var err error
		if id, err = d.ensureDevice(ctx, s); err != nil {
			return localapi.Status{}, d.controlRefusal(s, "register the device", err)
		}
	}
	// A leave of cid still pending must not reach control after this join.
	d.dropPendingLeave(cid)
	// While control answers (a join waits for the serving gateway, ~10 ms)
	// the prefs on disk already want cid: the write the answer would start
	// then has nothing to change, and the cluster's DNS, which waits for
	// the prefs, follows its tunnel at once. A crash in between leaves cid
	// wanted on disk, and the next start joins it as it joins every wanted
	// cluster.
	d.change(func(*state.Inputs) {
		if d.joining == nil {
			d.joining = map[string]int{}
		}
		d.joining[cid]++
		d.savePrefsLocked()
	})
	joined := func() {
		if d.joining[cid]--; d.joining[cid] <= 0 {
			delete(d.joining, cid)
		}
		d.savePrefsLocked() // unchanged on disk once cid is wanted: the applier skips it
	}
	if _, err := s.ctl.JoinCluster(ctx, id, cid); err != nil {
		d.change(func(*state.Inputs) { joined() })
		_ = d.settle(ctx) // a refusal answers with the prefs as they were back on disk
		return localapi.Status{}, d.controlRefusal(s, "connect "+cid, err)
	}
	// Control holds the device in cid; the prefs' write wanting it may not
	// have landed (e2e/daemonfault_test.go; sync.go unwanted).
	fault.Point("vpnd-join-answered")
	ok := d.current(s, func(in *state.Inputs) {
		joined()
		if !slices.Contains(in.Prefs.Wanted, cid) || def != "" && def != in.Prefs.DefaultCID {
			if !slices.Contains(in.Prefs.Wanted, cid) {
				in.Prefs.Wanted = append(in.Prefs.Wanted, cid)
				slices.Sort(in.Prefs.Wanted)
			}
			if def != "" {
				in.Prefs.DefaultCID = def
			}
			d.savePrefsLocked()
		}
		delete(in.JoinErrs, cid)
	})
	if !ok {
		d.change(func(*state.Inputs) { joined() }) // the session changed meanwhile
	}
	// No map is fetched here: the join wakes the device's map stream,
	// which brings the cluster within milliseconds (the client watches
	// status for it).
	go d.refreshAccounts(s) // names of clusters added since the session began

	d.log.Info("connect", "cid", cid)
	return d.answer(ctx)
}

func (d *daemon) refreshAccounts(s *syncSession) {
	ctx, cancel := context.WithTimeout(d.ctx, 15*time.Second)
	defer cancel()
	if cs, err := s.ctl.Clusters(ctx); err == nil {
		d.current(s, func(in *state.Inputs) { in.Accounts = cs })
	}
}

// controlRefusal maps an error from control during a request; a refused
// session ends the session here too.
func (d *daemon) controlRefusal(s *syncSession, what string, err error) *apiError {
	if api.IsCode(err, api.CodeDeviceRevoked) {
		d.refused(s, err)
		return errf(http.StatusConflict, localapi.CodeSignedOut, "", "this device was removed from RunOS: run `runos vpn up` to sign in again with a new key")
	}
	if d.refused(s, err) {
		return errf(http.StatusConflict, localapi.CodeSignedOut, "", "the session expired: run `runos vpn up` to sign in again")
	}
	return fromControl(s.apiURL, what, err)
}

// disconnect stops reaching cid: here at once, then on control.
func (d *daemon) disconnect(ctx context.Context, cid string) (localapi.Status, *apiError) {
	if err := api.CheckCID(cid); err != nil {
		return localapi.Status{}, errf(http.StatusBadRequest, localapi.CodeInvalid, "", "%v", err)
	}
	var s *syncSession
	var id string
	d.change(func(in *state.Inputs) {
		if i := slices.Index(in.Prefs.Wanted, cid); i >= 0 {
			in.Prefs.Wanted = slices.Delete(in.Prefs.Wanted, i, i+1)
			d.savePrefsLocked()
		}
		delete(in.JoinErrs, cid)
		s, id = d.sess, in.Prefs.DeviceID
	})
	if s != nil && id != "" {
		d.mu.Lock()
		p := store.Pending{Kind: store.PendingLeave, APIURL: d.in.Prefs.APIURL, Token: d.in.Prefs.AccessToken, DeviceID: id,
			Clusters: []string{cid}, Since: d.clock(), ExpiresAt: d.in.Prefs.ExpiresAt}
		d.mu.Unlock()
		if done, err := d.sendPending(ctx, p, nil); !done {
			// Torn down here; control hears it when it answers again.
			d.mu.Lock()
			d.addPendingLocked(p, err)
			d.updateLocked()
			d.mu.Unlock()
		}
	}
	d.log.Info("disconnect", "cid", cid)
	return d.answer(ctx)
}

// endSession is `runos vpn down`: every cluster comes down here, then the
// device leaves them on control and the session ends there; the token and
// the wanted clusters are forgotten, the device key stays. When control
// cannot be told now, the sign-out is pending (pending.go): it is retried
// until control answers, and status says so meanwhile.
func (d *daemon) endSession(ctx context.Context) (localapi.Status, *apiError) {
	var prev store.Prefs
	var joined []string
	d.change(func(in *state.Inputs) {
		prev = in.Prefs
		if in.Map != nil {
			for _, c := range in.Map.Clusters {
				joined = append(joined, c.CID)
			}
		}
		d.stopSyncLocked()
		// Signed out, still following the same control; what control
		// has not heard yet stays pending.
		in.Prefs = store.Prefs{Control: in.Prefs.Control, Pending: in.Prefs.Pending}
		d.savePrefsLocked()
		in.Map, in.Accounts, in.JoinErrs = nil, nil, nil
		in.SessionEnded, in.SessionErr, in.ControlErr = false, "", ""
	})
	if prev.AccessToken == "" {
		return d.answer(ctx)
	}
	slices.Sort(joined)
	p := store.Pending{Kind: store.PendingSignOut, APIURL: prev.APIURL, Token: prev.AccessToken, DeviceID: prev.DeviceID,
		Clusters: slices.Compact(append(joined, prev.Wanted...)), Since: d.clock(), ExpiresAt: prev.ExpiresAt}
	slices.Sort(p.Clusters)
	p.Clusters = slices.Compact(p.Clusters)
	done, err := d.sendPending(ctx, p, nil)
	if !done {
		d.mu.Lock()
		d.addPendingLocked(p, err)
		d.updateLocked()
		d.mu.Unlock()
	}
	d.log.Info("session ended", "user", prev.User, "atControl", done)
	return d.answer(ctx)
}
