package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/rules"
	"github.com/runos/vpn/control/store"
)

// handleGatewayMap is a gateway's long-poll: what its node must serve.
func (s *Server) handleGatewayMap(w http.ResponseWriter, r *http.Request, p *principal) {
	cid, nid := p.node.CID, p.node.NID
	s.longPoll(w, r, "gateway_map", p, func(ctx context.Context, _ *principal) (doc, *api.Error) {
		var m api.GatewayMap
		err := s.st.View(ctx, func(rd store.Reader) error {
			var err error
			m, err = s.gatewayMap(rd, cid, nid)
			return err
		})
		if err != nil {
			return doc{}, s.asError(ctx, err)
		}
		return doc{body: m, version: m.Version, topics: []*hub.Topic{s.hub.Topic(hub.Gateway(cid, nid))}}, nil
	})
}

// gatewayMap derives a node's map: its role for the cluster's service (see
// rules.GatewayRole) and, when it has one, everything to serve it.
func (s *Server) gatewayMap(rd store.Reader, cid, nid string) (api.GatewayMap, error) {
	m := api.GatewayMap{NodeID: nid, CID: cid}
	if _, err := rd.Node(cid, nid); errors.Is(err, store.ErrNotFound) {
		return m, errUnknownToken // the node was deleted: its token is void
	} else if err != nil {
		return m, err
	}
	var err error
	if m.Version, err = rd.TopicVersion(hub.Gateway(cid, nid)); err != nil {
		return m, err
	}
	c, err := rd.Cluster(cid)
	if err != nil {
		return m, err
	}
	svcs, err := rd.Services(cid)
	if err != nil || len(svcs) == 0 {
		return m, err
	}
	svc := svcs[0]
	var mv *model.Move
	if x, err := rd.InFlightMove(svc.ID); err == nil {
		mv = &x
	} else if !errors.Is(err, store.ErrNotFound) {
		return m, err
	}
	role := rules.GatewayRole(svc, mv, nid)
	if role == "" {
		return m, nil
	}
	peers, err := rd.Peers(cid, s.now())
	if err != nil {
		return m, err
	}
	gs := &api.GatewayService{ServiceID: svc.ID, CID: cid, Role: role, Port: svc.Port,
		Subnet: svc.Subnet.String(), Address: svc.Address().String(), DevicePool: s.devices.Prefix().String(),
		Domains: c.Domains(), Peers: make([]api.GatewayPeer, 0, len(peers))}
	if role != api.GatewayActive && mv != nil {
		gs.MoveID = mv.ID
	}
	for _, p := range peers {
		gs.Peers = append(gs.Peers, api.GatewayPeer{DeviceID: p.DeviceID, PublicKey: p.PublicKey, Address: p.Address.String(),
			ExpiresAt: p.ExpiresAt})
	}
	if gs.Inside, err = insideOf(rd, cid, svcs); err != nil {
		return m, err
	}
	if err := gatewayPolicy(rd, c.AID, gs, peers); err != nil {
		return m, err
	}
	m.Serve = gs
	return m, nil
}

func checkReport(rep *api.GatewayReport) *api.Error {
	if rep.PublicKey != "" {
		k, err := wgtypes.ParseKey(rep.PublicKey)
		if err != nil {
			return errInvalid("publicKey: not a WireGuard public key (32 bytes, base64)")
		}
		rep.PublicKey = k.String()
	}
	if rep.ListenPort < 0 || rep.ListenPort > 65535 {
		return errInvalid("listenPort %d out of range", rep.ListenPort)
	}
	if len(rep.Version) > 128 || len(rep.Error) > 4096 || len(rep.ServiceID) > 128 {
		return errInvalid("version, error or serviceId too long")
	}
	for i, hs := range rep.Handshakes {
		k, err := wgtypes.ParseKey(hs.PublicKey)
		if err != nil {
			return errInvalid("handshakes[%d].publicKey: not a WireGuard public key", i)
		}
		rep.Handshakes[i].PublicKey = k.String()
	}
	if rep.Listening && rep.PublicKey == "" {
		return errInvalid("a listening gateway must report its publicKey")
	}
	return checkInside(rep)
}

// sourceAddr is the gateway's address as control sees it: the detected
// public address, used when the world file gives none.
func sourceAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// handleGatewayReport is a gateway's heartbeat and facts: its key, whether
// it listens, and its peers' handshakes. A report that changes nothing a
// document shows bumps no version.
func (s *Server) handleGatewayReport(w http.ResponseWriter, r *http.Request, p *principal) {
	var rep api.GatewayReport
	if e := decodeUpTo(r, &rep, maxReportBody); e != nil {
		writeError(w, e)
		return
	}
	if e := checkReport(&rep); e != nil {
		writeError(w, e)
		return
	}
	// A join waiting on this replica needs only the fact that the gateway
	// acted on the map with its device, not this report's commit.
	s.reported.raise(p.node.CID, p.node.NID, rep.MapVersion)
	now := s.now()
	src := sourceAddr(r)
	var after func()
	fresh := s.hs.fresh(p.node.CID, rep.Handshakes, now)
	err := s.update(r.Context(), func(tx store.Writer) error {
		n, err := tx.Node(p.node.CID, p.node.NID)
		if errors.Is(err, store.ErrNotFound) {
			return errUnknownToken
		} else if err != nil {
			return err
		}
		before := n
		n.LastHeartbeat, n.GatewayVersion = now, rep.Version
		if rep.PublicKey != "" {
			n.GatewayKey = rep.PublicKey
		}
		// A gateway that started again is serving again only once it
		// listens: then its devices are told to handshake at once (the
		// restarted server has forgotten their sessions).
		restarted := rep.Listening && !rep.StartedAt.IsZero() && !rep.StartedAt.Equal(n.GatewayStartedAt)
		if restarted {
			n.GatewayStartedAt = rep.StartedAt.UTC()
		}
		if src.IsValid() && !src.IsLoopback() {
			n.DetectedIP = src
		}
		if err := tx.UpdateNode(n); err != nil {
			return err
		}
		if err := recordInside(tx, n, rep); err != nil {
			return err
		}
		if err := ackMap(tx, n, rep); err != nil {
			return err
		}
		svcs, err := tx.Services(n.CID)
		if err != nil {
			return err
		}
		if len(fresh) > 0 {
			c, err := tx.Cluster(n.CID)
			if err != nil {
				return err
			}
			if err := recordHandshakes(tx, n.CID, c.AID, fresh); err != nil {
				return err
			}
		}
		if before.Ingress() != n.Ingress() || restarted && hostsVPN(svcs, n.NID) {
			tx.Touch(hub.Cluster(n.CID))
			for _, svc := range svcs {
				tx.Touch(hub.Service(svc.ID))
			}
		}
		for _, svc := range svcs {
			if mv, err := tx.InFlightMove(svc.ID); err == nil {
				if mv.TargetNodeID == n.NID {
					if after, err = s.onTargetReport(tx, &mv, n, rep, now); err != nil {
						return err
					}
					continue
				}
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if svc.NodeID == n.NID {
				if err := s.onHostReport(tx, svc, n, rep); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.hs.written(p.node.CID, fresh)
	if after != nil {
		after()
	}
	w.WriteHeader(http.StatusNoContent)
}

// onHostReport follows the hosting node's gateway: the service serves once
// it listens with its key (and devices learn the key), fails with the
// gateway's error, and takes a new key if the gateway's changed.
func (s *Server) onHostReport(tx store.Writer, svc model.Service, n model.Node, rep api.GatewayReport) error {
	if rep.ServiceID != svc.ID {
		return nil
	}
	old := svc
	switch {
	case rep.Listening:
		svc.State, svc.Error, svc.PublicKey = api.ServiceServing, "", rep.PublicKey
	case rep.Error != "" && svc.State != api.ServiceServing:
		svc.State, svc.Error = api.ServiceFailed, fmt.Sprintf("the gateway on %s: %s", n.NID, rep.Error)
	}
	if svc == old {
		return nil
	}
	if svc.PublicKey != old.PublicKey || svc.State != old.State {
		tx.Touch(hub.Cluster(svc.CID)) // devices need the key, or learn it is not ready
	}
	tx.Touch(hub.Service(svc.ID))
	if svc.State == api.ServiceServing && old.State != api.ServiceServing {
		s.log.Info("VPN service serving", "service", svc.ID, "node", n.NID)
	}
	return tx.UpdateService(svc)
}
