package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/rules"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/token"
)

// handleRelayCheck answers a gateway asking whether a device may open a
// relay stream to it: the token must be a live session's, the key that
// session's device, the device joined to the gateway's cluster, and the
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
	if err != nil || req.Token == "" {
		writeError(w, errInvalid("relay check: want the device's token and its WireGuard public key"))
		return
	}
	dp, e := s.principalOf(r.Context(), token.Hash(req.Token))
	if e == nil && dp.kind != kindUser {
		e = errForbidden("the relay takes a device's sign-in, not an operator's or a node's token", "")
	}
	if e != nil {
		refusal := *e
		refusal.Status = http.StatusForbidden
		writeError(w, &refusal)
		return
	}
	cid, nid := p.node.CID, p.node.NID
	var out api.RelayCheck
	err = s.st.View(r.Context(), func(rd store.Reader) error {
		d, err := rd.DeviceByKey(key.String())
		if errors.Is(err, store.ErrNotFound) || err == nil && (d.User != dp.user.Email || d.SessionID != dp.session.ID) {
			return errForbidden("this public key is not the device of this sign-in", "register the device again: runos vpn up")
		} else if err != nil {
			return err
		}
		if d.Revoked() {
			e := errDeviceRevoked(d.RevokedAt)
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
		svcs, err := rd.Services(cid)
		if err != nil {
			return err
		}
		var mv *model.Move
		if len(svcs) > 0 {
			if m, err := rd.InFlightMove(svcs[0].ID); err == nil {
				mv = &m
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if len(svcs) == 0 || rules.GatewayRole(svcs[0], mv, nid) == "" {
			return errForbidden(fmt.Sprintf("node %s does not serve the VPN of %s", nid, cid), "the device map names the node that does")
		}
		out = api.RelayCheck{DeviceID: d.ID, User: d.User, ExpiresAt: dp.session.ExpiresAt}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
