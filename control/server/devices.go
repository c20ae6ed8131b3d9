package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/token"
)

func deviceDoc(d model.Device) api.Device {
	return api.Device{ID: d.ID, User: d.User, Name: d.Name, OS: d.OS, PublicKey: d.PublicKey, Address: d.Address.String()}
}

// checkRegister validates a registration: a 32-byte base64 WireGuard
// public key, a printable name and an OS word. (Nothing can tell a private
// key from a public one, which is why the body may hold no other field.)
func checkRegister(req *api.RegisterDeviceRequest) *api.Error {
	k, err := wgtypes.ParseKey(req.PublicKey)
	if err != nil {
		return &api.Error{Status: 400, Code: api.CodeInvalid,
			Message: "publicKey: not a WireGuard public key (32 bytes, base64)", Hint: "send the device's public key only; the private key never leaves the device"}
	}
	req.PublicKey = k.String()
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" || len(req.Name) > 64 || strings.IndexFunc(req.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return errInvalid("name: want the device's hostname, 1 to 64 printable characters")
	}
	if req.OS == "" || len(req.OS) > 16 || strings.IndexFunc(req.OS, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') }) >= 0 {
		return errInvalid("os: want runtime.GOOS, e.g. linux, darwin or windows")
	}
	return nil
}

// touchPeers records that the peers of every cluster the device joined may
// have changed: the gateway maps of those clusters' nodes, their services'
// device counts and the device's own map.
func touchPeers(tx store.Writer, d model.Device) error {
	cids, err := tx.DeviceClusters(d.ID)
	if err != nil {
		return err
	}
	tx.Touch(hub.Device(d.ID))
	for _, cid := range cids {
		if err := touchCluster(tx, cid); err != nil {
			return err
		}
	}
	return nil
}

// touchCluster touches every gateway and service of cid.
func touchCluster(tx store.Writer, cid string) error {
	nodes, err := tx.Nodes(cid)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		tx.Touch(hub.Gateway(cid, n.NID))
	}
	svcs, err := tx.Services(cid)
	for _, svc := range svcs {
		tx.Touch(hub.Service(svc.ID))
	}
	return err
}

func (s *Server) handleRegisterDevice(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.RegisterDeviceRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := checkRegister(&req); e != nil {
		writeError(w, e)
		return
	}
	var d model.Device
	var usage api.PoolUsage
	created := false
	now := s.now()
	err := s.update(r.Context(), func(tx store.Writer) error {
		if k, err := tx.KeyRevoked(req.PublicKey); err == nil {
			return errKeyRevoked(k)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		var err error
		d, err = tx.DeviceByKey(req.PublicKey)
		switch {
		case err == nil:
			if d.User != p.user.Email {
				return errConflict("this public key is registered to another user's device",
					"each device has its own key; generate a new one on this device (delete the daemon's device.key)")
			}
			rebind := d.SessionID != p.session.ID
			d.Name, d.OS, d.SessionID, d.LastSeen = req.Name, req.OS, p.session.ID, now
			if err := tx.UpdateDevice(d); err != nil {
				return err
			}
			if rebind {
				return touchPeers(tx, d)
			}
			tx.Touch(hub.Device(d.ID))
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := s.checkDeviceLimit(tx, p.user.Email); err != nil {
			return err
		}
		lo, hi := s.devices.Range()
		idx, err := tx.FreeDeviceAddrIndex(lo, hi)
		if errors.Is(err, store.ErrPoolFull) {
			return &api.Error{Status: 503, Code: api.CodeUnavailable,
				Message: fmt.Sprintf("the device pool %s has no address left", s.devices.Prefix()), Hint: "start runos-control with a larger --device-pool"}
		} else if err != nil {
			return err
		}
		d = model.Device{ID: token.ID("dev"), User: p.user.Email, Name: req.Name, OS: req.OS, PublicKey: req.PublicKey,
			AddrIndex: idx, Address: s.devices.Addr(idx), SessionID: p.session.ID, CreatedAt: now, LastSeen: now}
		created = true
		tx.Touch(hub.Device(d.ID))
		if err := tx.PutDevice(d); err != nil {
			return err
		}
		if usage, err = s.poolUsage(tx); err != nil {
			return err
		}
		return s.record(tx, r, p, audit.Entry{AIDs: p.user.Accounts, Kind: audit.DeviceRegistered, Target: d.ID,
			Outcome: fmt.Sprintf("%s (%s), address %s", d.Name, d.OS, d.Address)})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		s.log.Info("device registered", "device", d.ID, "user", d.User, "name", d.Name, "address", d.Address)
		s.notePool(usage)
	}
	writeJSON(w, status, deviceDoc(d))
}

// errKeyRevoked refuses to register a key that was revoked.
func errKeyRevoked(k model.RevokedKey) *api.Error {
	return &api.Error{Status: 403, Code: api.CodeDeviceRevoked, At: k.RevokedAt.UTC(),
		Message: fmt.Sprintf("this device's key was revoked at %s by %s: it may not register again", k.RevokedAt.UTC().Format(time.RFC3339), k.RevokedBy),
		Hint:    "the daemon makes a new key: run `runos vpn up` again"}
}

// checkDeviceLimit refuses a new device to a user who has as many as one
// may have, naming the limit and how to remove an old one.
func (s *Server) checkDeviceLimit(tx store.Reader, email string) error {
	n, err := tx.CountUserDevices(email)
	if err != nil || n < s.cfg.MaxDevicesPerUser {
		return err
	}
	return &api.Error{Status: 409, Code: api.CodeDeviceLimit,
		Message: fmt.Sprintf("%s has %d devices, the most one user may have (runos-control --max-devices-per-user %d)", email, n, s.cfg.MaxDevicesPerUser),
		Hint:    "remove one you no longer use: list them with `runos vpn devices`, then `runos vpn devices remove ID`"}
}

// ownDevice reads the caller's device id: 404 for another user's device.
func ownDevice(rd store.Reader, p *principal, id string) (model.Device, error) {
	d, err := rd.Device(id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.User != p.user.Email) {
		return model.Device{}, &api.Error{Status: 404, Code: api.CodeNotFound,
			Message: fmt.Sprintf("no device %s of yours", id), Hint: "register the device first (POST /v1/devices)"}
	}
	return d, err
}

func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request, p *principal) {
	id, cid := r.PathValue("id"), r.PathValue("cid")
	var refused *audit.Entry
	var serving []string // the nodes whose gateways must hold the device before the answer (joinack.go)
	err := s.update(r.Context(), func(tx store.Writer) error {
		refused = nil // a retried transaction starts again
		d, err := ownDevice(tx, p, id)
		if err != nil {
			return err
		}
		c, err := cluster(tx, p, cid, noVerb)
		if err != nil {
			return err
		}
		var no *api.Error
		if no, refused, err = s.mayJoin(tx, p, c, d); err != nil {
			return err
		} else if no != nil {
			return no
		}
		if c.UserVPN == api.UserVPNNetBird {
			return errRefused(fmt.Sprintf("the user VPN of %s is NetBird, not WireGuard: RunOS VPN cannot connect to it", cid),
				"connect with the NetBird client instead")
		}
		svcs, err := tx.Services(cid)
		if err != nil {
			return err
		}
		if len(svcs) == 0 {
			return errRefused(fmt.Sprintf("%s has no VPN server: the user VPN is something an operator turns on", cid),
				fmt.Sprintf("an operator installs it once: runos services wireguard add --cid %s --target-node-id <nid> --name <name> --follow", cid))
		}
		joined, err := tx.JoinCluster(d.ID, cid)
		if err != nil {
			return err
		}
		if serving, err = s.servingNodes(tx, svcs); err != nil {
			return err
		}
		if joined {
			if err := s.record(tx, r, p, audit.Entry{AIDs: []string{c.AID}, Kind: audit.DeviceJoined, CID: cid, Target: d.ID,
				Outcome: fmt.Sprintf("%s (%s of %s) joined %s", d.Name, d.Address, d.User, cid)}); err != nil {
				return err
			}
		}
		// The daemon joining is the device's current sign-in.
		rebind := d.SessionID != p.session.ID
		if rebind {
			d.SessionID = p.session.ID
			if err := tx.UpdateDevice(d); err != nil {
				return err
			}
			return touchPeers(tx, d)
		}
		if joined {
			tx.Touch(hub.Device(d.ID))
			return touchCluster(tx, cid)
		}
		return nil
	})
	if refused != nil {
		s.recordRefusal(r, p, *refused)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	e, err := s.clusterConfig(r.Context(), cid)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var waited time.Duration
	if len(serving) > 0 {
		start := time.Now()
		s.awaitGateways(r.Context(), cid, serving)
		waited = time.Since(start)
	}
	s.log.Info("device joined", "device", id, "cid", cid, "gatewayWait", waited.Round(10*time.Microsecond).String())
	writeJSON(w, http.StatusOK, e.cfg)
}

func (s *Server) handleLeave(w http.ResponseWriter, r *http.Request, p *principal) {
	id, cid := r.PathValue("id"), r.PathValue("cid")
	err := s.update(r.Context(), func(tx store.Writer) error {
		d, err := ownDevice(tx, p, id)
		if err != nil {
			return err
		}
		c, err := cluster(tx, p, cid, noVerb)
		if err != nil {
			return err
		}
		left, err := tx.LeaveCluster(d.ID, cid)
		if err != nil || !left {
			return err
		}
		if err := s.record(tx, r, p, audit.Entry{AIDs: []string{c.AID}, Kind: audit.DeviceLeft, CID: cid, Target: d.ID,
			Outcome: fmt.Sprintf("%s (%s of %s) left %s", d.Name, d.Address, d.User, cid)}); err != nil {
			return err
		}
		tx.Touch(hub.Device(d.ID))
		return touchCluster(tx, cid)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("device left", "device", id, "cid", cid)
	w.WriteHeader(http.StatusNoContent)
}

// handleDeviceMap is the device's long-poll: its device, its session and
// every joined cluster's VPN config. It wakes on the device's own changes,
// its session's end or expiry (longPoll checks the session again: expiry
// answers 401 session_expired), and any change of a joined cluster (a move).
func (s *Server) handleDeviceMap(w http.ResponseWriter, r *http.Request, p *principal) {
	id := r.PathValue("id")
	// The device's state as this request last read it, kept while current:
	// a move wakes 10,000 streams whose devices did not change, and each
	// then reads the cluster's new config but not its device again, not
	// even from the shared cache; likewise the device's last contact as
	// the throttle last told it. Only the request's own reader (a
	// long-poll's wake, a stream's writer) touches them, one read at a time.
	var (
		de   *deviceEntry
		seen time.Time
	)
	s.longPoll(w, r, "device_map", p, func(ctx context.Context, p *principal) (doc, *api.Error) {
		if de == nil || !de.current() {
			var err error
			if de, err = s.deviceState(ctx, id); err != nil {
				return doc{}, s.asError(ctx, err)
			}
		}
		if de.dev.User != p.user.Email {
			return doc{}, &api.Error{Status: 404, Code: api.CodeNotFound,
				Message: fmt.Sprintf("no device %s of yours", id), Hint: "register the device first (POST /v1/devices)"}
		}
		if de.dev.Revoked() {
			return doc{}, errDeviceRevoked(de.dev.RevokedAt)
		}
		// Its contact counts once it is known to be the caller's own
		// (written at most every seenEvery, however often it wakes; the
		// throttle is asked only once what it said last has gone stale).
		if now := s.now(); !s.seen.fresh(seen, now) {
			seen = s.markSeen(ctx, id, now)
		}
		m := &deviceMapWire{Version: max(de.version, p.sesVer), Device: de.json, Session: p.sesJSON,
			Clusters: make([]json.RawMessage, 0, len(de.cids))}
		topics := make([]*hub.Topic, 0, 2+len(de.cids)) // room for the caller's own topic
		topics = append(topics, de.topic)
		for _, cid := range de.cids {
			e, err := s.clusterConfig(ctx, cid)
			if err != nil {
				return doc{}, s.asError(ctx, err)
			}
			if e.ok {
				m.Clusters = append(m.Clusters, e.json)
			}
			m.Version = max(m.Version, e.version)
			topics = append(topics, e.topic)
		}
		return doc{body: m, version: m.Version, topics: topics}, nil
	})
}

// deviceMapWire is api.DeviceMap made of parts encoded once: the device
// (until it changes), the session (per sign-in) and each cluster's config
// (per change of the cluster: after a move every device of the cluster
// gets the same bytes). Only the answers are put together, by appendJSON,
// not a long-poll that parks.
type deviceMapWire struct {
	Version  uint64
	Device   json.RawMessage // api.Device
	Session  json.RawMessage // api.SessionInfo
	Clusters []json.RawMessage
}

// appendJSON appends what json.Marshal(api.DeviceMap) gives
// (TestDeviceMapWireMatchesAPI): the parts are json.Marshal's own output,
// compact and escaped alike.
func (m *deviceMapWire) appendJSON(b []byte) []byte {
	b = append(b, `{"version":`...)
	b = strconv.AppendUint(b, m.Version, 10)
	b = append(b, `,"device":`...)
	b = append(b, m.Device...)
	b = append(b, `,"session":`...)
	b = append(b, m.Session...)
	b = append(b, `,"clusters":[`...)
	for i, c := range m.Clusters {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, c...)
	}
	return append(b, "]}"...)
}

// handleEndSession ends the caller's session and, in the same transaction,
// takes its devices out of every gateway's peers.
func (s *Server) handleEndSession(w http.ResponseWriter, r *http.Request, p *principal) {
	now := s.now()
	err := s.update(r.Context(), func(tx store.Writer) error {
		sess, err := tx.Session(p.session.ID)
		if err != nil {
			return err
		}
		if err := closeSession(tx, sess, model.SessionEnded, now); err != nil {
			return err
		}
		return s.record(tx, r, p, audit.Entry{AIDs: p.user.Accounts, Kind: audit.SignedOut, Target: sess.ID,
			Outcome: "signed out of " + sess.ClientID})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("session ended", "session", p.session.ID, "user", p.user.Email)
	s.afterSessionsClosed()
	w.WriteHeader(http.StatusNoContent)
}

// closeSession records sess as over (state is model.SessionEnded or
// model.SessionExpired, at when) and takes its devices out of every
// gateway's peers, in the caller's transaction so no gateway keeps a device
// of a session that is over.
func closeSession(tx store.Writer, sess model.Session, state string, at time.Time) error {
	sess.State, sess.EndedAt = state, at
	if err := tx.UpdateSession(sess); err != nil {
		return err
	}
	tx.Touch(hub.Session(sess.ID))
	devs, err := tx.DevicesOfSession(sess.ID)
	if err != nil {
		return err
	}
	for _, d := range devs {
		if err := touchPeers(tx, d); err != nil {
			return err
		}
	}
	return nil
}
