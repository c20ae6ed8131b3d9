package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/relayticket"
	"github.com/runos/vpn/control/rules"
	"github.com/runos/vpn/control/store"
)

// handleRelayCheck answers a gateway asking whether a device may open a
// relay stream to it: the ticket must be control's, unlapsed, for this
// gateway's cluster and node; the key the ticket's device's, under the
// ticket's session, still live; the device joined to the cluster, and the
// gateway's node serving that cluster's VPN (active, or either end of a
// move). Every refusal about the device is a 403 carrying the reason's
// code (session_expired, unauthorized, forbidden), so that a 401 always
// means the gateway's own token failed.
func (s *Server) handleRelayCheck(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.RelayCheckRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	key, err := wgtypes.ParseKey(req.PublicKey)
	if err != nil || req.Ticket == "" {
		writeError(w, errInvalid("relay check: want the device's relay ticket and its WireGuard public key"))
		return
	}
	now := s.now()
	cid, nid := p.node.CID, p.node.NID
	c, err := s.tickets.Check(req.Ticket, now)
	switch {
	case errors.Is(err, relayticket.ErrExpired):
		writeError(w, &api.Error{Status: http.StatusForbidden, Code: api.CodeSessionExpired, Message: err.Error(),
			Hint: "the device asks control for a new one"})
		return
	case err != nil:
		writeError(w, &api.Error{Status: http.StatusForbidden, Code: api.CodeUnauthorized, Message: err.Error(),
			Hint: "the relay takes a relay ticket from control, never a session token"})
		return
	case c.CID != cid || c.NID != nid:
		writeError(w, errForbidden(fmt.Sprintf("this relay ticket is for %s's node %s, not %s's node %s", c.CID, c.NID, cid, nid),
			"the device asks control for a ticket of the node its map names"))
		return
	}
	var out api.RelayCheck
	err = s.st.View(r.Context(), func(rd store.Reader) error {
		d, err := rd.Device(c.Device)
		if errors.Is(err, store.ErrNotFound) || err == nil && (d.PublicKey != key.String() || d.SessionID != c.Session) {
			return errForbidden("this public key is not the device of this ticket's sign-in", "register the device again: runos vpn up")
		} else if err != nil {
			return err
		}
		if d.Revoked() {
			e := errDeviceRevoked(d.RevokedAt)
			e.Status = http.StatusForbidden
			return e
		}
		sess, err := rd.Session(c.Session)
		if err != nil {
			return err
		}
		if e := sessionRefusal(sess, now); e != nil {
			e.Status = http.StatusForbidden
			return e
		}
		cids, err := rd.DeviceClusters(d.ID)
		if err != nil {
			return err
		}
		if !slices.Contains(cids, cid) {
			return errForbidden(fmt.Sprintf("device %s has not joined %s", d.ID, cid), "runos vpn connect "+cid)
		}
		if e, err := servesCluster(rd, cid, nid); err != nil {
			return err
		} else if e != nil {
			return e
		}
		out = api.RelayCheck{DeviceID: d.ID, User: d.User, ExpiresAt: sess.ExpiresAt}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionRefusal is why sess no longer authorises anything at now, or nil.
func sessionRefusal(sess model.Session, now time.Time) *api.Error {
	switch {
	case sess.State == model.SessionEnded:
		e := *errEnded
		return &e
	case sess.State == model.SessionRevoked:
		return errDeviceRevoked(sess.EndedAt)
	case sess.State == model.SessionDisowned:
		e := *errDisowned
		return &e
	case sess.State == model.SessionRemoved:
		e := *errRemoved
		return &e
	case sess.State == model.SessionExpired || !now.Before(sess.ExpiresAt):
		return errExpired(sess.ExpiresAt)
	}
	return nil
}

// servesCluster refuses unless node nid serves cid's VPN now (active, or
// either end of a move).
func servesCluster(rd store.Reader, cid, nid string) (*api.Error, error) {
	svcs, err := rd.Services(cid)
	if err != nil {
		return nil, err
	}
	var mv *model.Move
	if len(svcs) > 0 {
		if m, err := rd.InFlightMove(svcs[0].ID); err == nil {
			mv = &m
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	if len(svcs) == 0 || rules.GatewayRole(svcs[0], mv, nid) == "" {
		return errForbidden(fmt.Sprintf("node %s does not serve the VPN of %s", nid, cid), "the device map names the node that does"), nil
	}
	return nil, nil
}

// relayTicketTTL is how long a relay ticket may be shown: long enough to
// dial, short enough that one seen by a relay or an ingress is soon
// worthless. The stream it opens lasts as long as the session.
const relayTicketTTL = 2 * time.Minute

// handleRelayTicket gives a device the ticket it shows the relay of the
// node serving cid's VPN: for its own device, of this sign-in, joined to
// cid. Anything else is 404 (nothing is said of others' devices).
func (s *Server) handleRelayTicket(w http.ResponseWriter, r *http.Request, p *principal) {
	id, cid := r.PathValue("id"), r.PathValue("cid")
	now := s.now()
	var out api.RelayTicket
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		d, err := rd.Device(id)
		if errors.Is(err, store.ErrNotFound) || err == nil && (d.User != p.user.Email || d.SessionID != p.session.ID) {
			return errNotFound("no device %s of this sign-in", id)
		} else if err != nil {
			return err
		}
		if d.Revoked() {
			return errDeviceRevoked(d.RevokedAt)
		}
		cids, err := rd.DeviceClusters(d.ID)
		if err != nil {
			return err
		}
		svcs, err := rd.Services(cid)
		if err != nil {
			return err
		}
		if !slices.Contains(cids, cid) || len(svcs) == 0 {
			return errNotFound("device %s has not joined %s's VPN", id, cid)
		}
		exp := now.Add(relayTicketTTL)
		if p.session.ExpiresAt.Before(exp) {
			exp = p.session.ExpiresAt
		}
		out = api.RelayTicket{NodeID: svcs[0].NodeID, ExpiresAt: exp.UTC().Truncate(time.Second),
			Ticket: s.tickets.Issue(relayticket.Claims{Device: d.ID, Session: p.session.ID, CID: cid, NID: svcs[0].NodeID, Expires: exp})}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// checkRelayOverride checks an operator's relay URL against the node that
// serves it: its host must be {ingress}, the node's ingress address, or a
// name that resolves to it. Anywhere else would be handed every device's
// relay ticket and its traffic.
func (s *Server) checkRelayOverride(ctx context.Context, raw string, n model.Node) *api.Error {
	if raw == "" {
		return nil
	}
	if err := api.CheckRelayURL(raw); err != nil {
		return errInvalid("relayUrl: %v", err)
	}
	a := n.Ingress()
	if !a.IsValid() {
		if u, err := url.Parse(strings.ReplaceAll(raw, api.RelayIngress, "192.0.2.1")); err == nil && u.Hostname() == "192.0.2.1" &&
			strings.HasPrefix(raw, "https://"+api.RelayIngress) {
			return nil // the node's address, once it has one
		}
		return errInvalid("relayUrl %q: node %s has no ingress address yet to check it against; use https://%s/… (the node's address)", raw, n.NID, api.RelayIngress)
	}
	u, err := api.ParseRelayURL(strings.ReplaceAll(raw, api.RelayIngress, ingressHost(a)))
	if err != nil {
		return errInvalid("relayUrl: %v", err)
	}
	name, err := api.RelayHostIs(u, a)
	if err != nil {
		return errInvalid("relayUrl: %v (%s's ingress address); use %s, that address, or a name that resolves to it", err, n.NID, api.RelayIngress)
	}
	if name == "" {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := s.cfg.Resolve(rctx, name)
	if err != nil {
		return errInvalid("relayUrl: %s does not resolve here (%v); use %s, %s's ingress address %s, or a name that resolves to it", name, err, api.RelayIngress, n.NID, a)
	}
	for _, x := range addrs {
		if x.Unmap() == a.Unmap() {
			return nil
		}
	}
	return errInvalid("relayUrl: %s resolves to %v, not %s's ingress address %s; use %s, that address, or a name that resolves to it", name, addrs, n.NID, a, api.RelayIngress)
}

func ingressHost(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}
