package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/rules"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/token"
	"github.com/runos/vpn/policy"
)

func service(r store.Reader, cid, id string) (model.Service, error) {
	svc, err := r.Service(id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && svc.CID != cid) {
		return model.Service{}, &api.Error{Status: 404, Code: api.CodeNotFound,
			Message: fmt.Sprintf("no VPN service %s in cluster %s", id, cid), Hint: "list them: runos services wireguard list --cid " + cid}
	}
	return svc, err
}

func (s *Server) handleServices(w http.ResponseWriter, r *http.Request, p *principal) {
	out := []api.VPNService{}
	now := s.now()
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		c, err := cluster(rd, p, r.PathValue("cid"), noVerb)
		if err != nil {
			return err
		}
		svcs, err := rd.Services(c.CID)
		if err != nil {
			return err
		}
		for _, svc := range svcs {
			d, err := s.serviceDoc(rd, svc, now)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleService is GET of one service, long-pollable for --follow.
func (s *Server) handleService(w http.ResponseWriter, r *http.Request, p *principal) {
	cid, id := r.PathValue("cid"), r.PathValue("id")
	s.longPoll(w, r, "service", p, func(ctx context.Context, p *principal) (doc, *api.Error) {
		var d api.VPNService
		err := s.st.View(ctx, func(rd store.Reader) error {
			if _, err := cluster(rd, p, cid, noVerb); err != nil {
				return err
			}
			svc, err := service(rd, cid, id)
			if err != nil {
				return err
			}
			d, err = s.serviceDoc(rd, svc, s.now())
			return err
		})
		if err != nil {
			return doc{}, s.asError(ctx, err)
		}
		return doc{body: d, version: d.Version, topics: []*hub.Topic{s.hub.Topic(hub.Service(id))}}, nil
	})
}

func (s *Server) handleAddService(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.AddVPNServiceRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	switch {
	case req.Name == "" || len(req.Name) > 64:
		writeError(w, errInvalid("name: give the service a name of 1 to 64 characters (--name)"))
		return
	case req.TargetNodeID == "":
		writeError(w, errInvalid("targetNodeId: say which node hosts the server (--target-node-id)"))
		return
	case req.Port < 0 || req.Port > 65535:
		writeError(w, errInvalid("port %d: want 1 to 65535 (default %d)", req.Port, api.DefaultVPNPort))
		return
	}
	if err := api.CheckRelayURL(req.RelayURL); err != nil {
		writeError(w, errInvalid("relayUrl: %v (--relay-url)", err))
		return
	}
	target, e := s.relayNode(r, p, r.PathValue("cid"), req.TargetNodeID, req.RelayURL)
	if e != nil {
		writeError(w, e)
		return
	}
	if req.Port == 0 {
		req.Port = api.DefaultVPNPort
	}
	var out api.VPNService
	var svc model.Service
	now := s.now()
	err := s.update(r.Context(), func(tx store.Writer) error {
		c, err := cluster(tx, p, r.PathValue("cid"), policy.MoveServices)
		if err != nil {
			return err
		}
		target, err := sameNode(tx, target, req.RelayURL)
		if err != nil {
			return err
		}
		existing, err := tx.Services(c.CID)
		if err != nil {
			return err
		}
		if e := rules.CheckAddService(c, existing); e != nil {
			return e
		}
		lo, hi := s.services.Range()
		idx, err := tx.FreeServiceSubnetIndex(lo, hi)
		if errors.Is(err, store.ErrPoolFull) {
			return &api.Error{Status: 503, Code: api.CodeUnavailable,
				Message: fmt.Sprintf("the service pool %s has no /24 left", s.services.Prefix()), Hint: "start runos-control with a larger --service-pool"}
		} else if err != nil {
			return err
		}
		svc = model.Service{ID: token.ID("wg"), CID: c.CID, Name: req.Name, NodeID: target.NID, Port: req.Port,
			State: api.ServiceInstalling, SubnetIndex: idx, Subnet: s.services.Subnet(idx), CreatedAt: now, RelayURL: req.RelayURL}
		if err := tx.PutService(svc); err != nil {
			return err
		}
		if c.UserVPN != api.UserVPNWireGuard {
			c.UserVPN = api.UserVPNWireGuard
			if err := tx.UpdateCluster(c); err != nil {
				return err
			}
		}
		tx.Touch(hub.Service(svc.ID), hub.Cluster(c.CID), hub.Gateway(c.CID, target.NID))
		if err := s.record(tx, r, p, audit.Entry{AIDs: []string{c.AID}, Kind: audit.ServiceAdded, CID: c.CID, Target: svc.ID,
			Outcome: fmt.Sprintf("%s on %s, port %d, subnet %s: installing", svc.Name, svc.NodeID, svc.Port, svc.Subnet)}); err != nil {
			return err
		}
		out, err = s.serviceDoc(tx, svc, now)
		if err != nil {
			return err
		}
		out.Version, err = tx.CommitVersion()
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("VPN service added", "cid", svc.CID, "service", svc.ID, "node", svc.NodeID, "subnet", svc.Subnet)
	s.afterStore("install:"+svc.ID, now.Add(s.cfg.MoveReadyTimeout), func() error { return s.installTimeout(svc.ID) })
	writeJSON(w, http.StatusCreated, out)
}

// handleSetRelay sets (or resets) the relay URL devices are given: every
// joined device's map changes with it, as with a move.
func (s *Server) handleSetRelay(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.SetRelayRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	req.RelayURL = strings.TrimSpace(req.RelayURL)
	if err := api.CheckRelayURL(req.RelayURL); err != nil {
		writeError(w, errInvalid("relayUrl: %v", err))
		return
	}
	cid, id := r.PathValue("cid"), r.PathValue("id")
	var nid string
	if err := s.st.View(r.Context(), func(rd store.Reader) error {
		c, err := cluster(rd, p, cid, policy.MoveServices)
		if err != nil {
			return err
		}
		svc, err := service(rd, c.CID, id)
		nid = svc.NodeID
		return err
	}); err != nil {
		s.fail(w, r, err)
		return
	}
	host, e := s.relayNode(r, p, cid, nid, req.RelayURL)
	if e != nil {
		writeError(w, e)
		return
	}
	var out api.VPNService
	now := s.now()
	err := s.update(r.Context(), func(tx store.Writer) error {
		c, err := cluster(tx, p, cid, policy.MoveServices)
		if err != nil {
			return err
		}
		svc, err := service(tx, c.CID, id)
		if err != nil {
			return err
		}
		if svc.NodeID != host.NID {
			return errConflict("the service moved while its relay URL was checked", "try again")
		}
		if _, err := sameNode(tx, host, req.RelayURL); err != nil {
			return err
		}
		svc.RelayURL = req.RelayURL
		if err := tx.UpdateService(svc); err != nil {
			return err
		}
		tx.Touch(hub.Service(svc.ID), hub.Cluster(c.CID))
		out, err = s.serviceDoc(tx, svc, now)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("VPN service relay set", "cid", out.CID, "service", out.ID, "relayUrl", out.RelayURL, "relay", out.Relay)
	writeJSON(w, http.StatusOK, out)
}

// relayNode reads node nid of cid (the caller must operate cid) and checks
// the relay URL override raw against it, outside any transaction: the
// check may ask DNS. sameNode then makes sure, inside the change, that the
// node's address did not change meanwhile.
func (s *Server) relayNode(r *http.Request, p *principal, cid, nid, raw string) (model.Node, *api.Error) {
	var n model.Node
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		if _, err := cluster(rd, p, cid, policy.MoveServices); err != nil {
			return err
		}
		var err error
		n, err = node(rd, cid, nid)
		return err
	})
	if err != nil {
		return n, s.asError(r.Context(), err)
	}
	return n, s.checkRelayOverride(r.Context(), raw, n)
}

// sameNode reads checked's node again in tx: with a relay override, its
// ingress address must be the one the override was checked against.
func sameNode(tx store.Reader, checked model.Node, raw string) (model.Node, error) {
	n, err := node(tx, checked.CID, checked.NID)
	if err != nil || raw == "" {
		return n, err
	}
	if n.Ingress() != checked.Ingress() {
		return n, errConflict(fmt.Sprintf("%s's ingress address changed while the relay URL was checked", n.NID), "try again")
	}
	return n, nil
}

// installTimeout marks an added service failed when its gateway did not
// come up in time. A later report of the server listening still makes it
// serving.
func (s *Server) installTimeout(id string) error {
	ctx, cancel := s.bg()
	defer cancel()
	err := s.update(ctx, func(tx store.Writer) error {
		svc, err := tx.Service(id)
		if err != nil || svc.State != api.ServiceInstalling {
			return err
		}
		svc.State = api.ServiceFailed
		svc.Error = fmt.Sprintf("the gateway on %s did not bring the server up within %s (is runos-gateway running on %s?)",
			svc.NodeID, s.cfg.MoveReadyTimeout, svc.NodeID)
		tx.Touch(hub.Service(id))
		return tx.UpdateService(svc)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("install timeout", "service", id, "err", err)
		return err
	}
	return nil
}

func (s *Server) handleMovePlan(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.MoveRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	var plan api.MovePlan
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		var err error
		plan, _, err = s.planMove(rd, p, r.PathValue("cid"), r.PathValue("id"), req)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, plan)
}

type moveContext struct {
	c        model.Cluster
	svc      model.Service
	from, to model.Node
	inFlight *model.Move
}

func (s *Server) planMove(rd store.Reader, p *principal, cid, id string, req api.MoveRequest) (api.MovePlan, moveContext, error) {
	var mc moveContext
	c, err := cluster(rd, p, cid, policy.MoveServices)
	if err != nil {
		return api.MovePlan{}, mc, err
	}
	if req.TargetNodeID == "" {
		return api.MovePlan{}, mc, errInvalid("targetNodeId: say which node to move the server to (--target-node-id)")
	}
	svc, err := service(rd, cid, id)
	if err != nil {
		return api.MovePlan{}, mc, err
	}
	to, err := node(rd, cid, req.TargetNodeID)
	if err != nil {
		return api.MovePlan{}, mc, err
	}
	from, err := rd.Node(cid, svc.NodeID)
	if err != nil {
		return api.MovePlan{}, mc, err
	}
	mc = moveContext{c: c, svc: svc, from: from, to: to}
	if m, err := rd.InFlightMove(svc.ID); err == nil {
		mc.inFlight = &m
	} else if !errors.Is(err, store.ErrNotFound) {
		return api.MovePlan{}, mc, err
	}
	plan, e := rules.PlanMove(svc, from, to, s.now(), s.heartbeats(), s.cfg.MoveReadyTimeout)
	if e != nil {
		return api.MovePlan{}, mc, e
	}
	return plan, mc, nil
}
