package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/rules"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/policy"
)

func (s *Server) handleMe(w http.ResponseWriter, r *http.Request, p *principal) {
	me := api.Me{Accounts: p.accounts(), Operates: p.operated()}
	me.Operator = len(me.Operates) > 0
	if p.kind == kindUser {
		me.User, me.ExpiresAt, me.SessionID = p.user.Email, p.session.ExpiresAt, p.session.ID
		err := s.st.View(r.Context(), func(rd store.Reader) (err error) {
			me.May, err = ruleGrants(rd, p)
			return err
		})
		if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if me.Accounts == nil {
		me.Accounts = []string{}
	}
	writeJSON(w, http.StatusOK, me)
}

// noVerb asks cluster for no operator verb: the caller only reads or
// connects.
const noVerb policy.Action = ""

// cluster reads cid for the caller: 404 when it does not exist or is not
// the caller's to see (the two are not told apart), 403 when an operator
// verb is asked (verb not noVerb) by a caller who may not use it there:
// neither the operator role in the account (nor its token), nor an
// `operate` rule of the account's policy granting it on this cluster.
func cluster(r store.Reader, p *principal, cid string, verb policy.Action) (model.Cluster, error) {
	if err := api.CheckCID(cid); err != nil {
		return model.Cluster{}, errInvalid("%v", err)
	}
	c, err := r.Cluster(cid)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !p.canSee(c.AID)) {
		return model.Cluster{}, &api.Error{Status: 404, Code: api.CodeNotFound,
			Message: fmt.Sprintf("no cluster %s among your clusters", cid), Hint: "list them: runos clusters list"}
	}
	if err != nil {
		return model.Cluster{}, err
	}
	if verb == noVerb || p.canOperate(c.AID) {
		return c, nil
	}
	why := ""
	if p.kind == kindUser {
		pol, _, err := accountPolicy(r, c.AID)
		if err != nil {
			return model.Cluster{}, err
		}
		subj, err := subject(r, c.AID, p.user)
		if err != nil {
			return model.Cluster{}, err
		}
		d := pol.MayOperate(subj, c.CID, verb)
		if d.Allow {
			return c, nil
		}
		why = ": " + d.Reason
	}
	return model.Cluster{}, errForbidden(
		fmt.Sprintf("%s in %s needs the operator role on account %s, its operator token, or an `operate … -> %s: %s` rule in its policy%s", verb, c.CID, c.AID, c.CID, verb, why),
		"sign in as an operator with `runos login`, set RUNOS_TOKEN to the account's operator token, or ask an operator for the rule")
}

func node(r store.Reader, cid, nid string) (model.Node, error) {
	n, err := r.Node(cid, nid)
	if errors.Is(err, store.ErrNotFound) {
		return n, &api.Error{Status: 404, Code: api.CodeNotFound, Message: fmt.Sprintf("no node %s in cluster %s", nid, cid),
			Hint: "list them: runos nodes list --cid " + cid}
	}
	return n, err
}

// clusterNode reads cid as cluster does, then its node nid: the errors of
// cluster first, so a caller who may not see the cluster learns nothing of
// its nodes.
func clusterNode(r store.Reader, p *principal, cid, nid string, verb policy.Action) (model.Cluster, model.Node, error) {
	c, err := cluster(r, p, cid, verb)
	if err != nil {
		return model.Cluster{}, model.Node{}, err
	}
	n, err := node(r, c.CID, nid)
	if err != nil {
		return model.Cluster{}, model.Node{}, err
	}
	return c, n, nil
}

func (s *Server) handleClusters(w http.ResponseWriter, r *http.Request, p *principal) {
	out := []api.Cluster{}
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		cs, err := rd.Clusters(p.accounts())
		for _, c := range cs {
			out = append(out, clusterDoc(c))
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request, p *principal) {
	var d api.ClusterDetail
	now := s.now()
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		c, err := cluster(rd, p, r.PathValue("cid"), noVerb)
		if err != nil {
			return err
		}
		nodes, svcs, err := nodesAndServices(rd, c.CID)
		if err != nil {
			return err
		}
		d = api.ClusterDetail{Cluster: clusterDoc(c), CustomDomains: c.CustomDomains,
			DNSRecords: rules.DNSRecords(c, nodes), Nodes: []api.Node{}, VPNServices: []api.VPNService{}}
		if p.canOperate(c.AID) {
			// Every account's devices share the pool: only operators see it.
			u, err := s.poolUsage(rd)
			if err != nil {
				return err
			}
			d.DevicePool = &u
		}
		for _, n := range nodes {
			d.Nodes = append(d.Nodes, s.nodeDoc(n, svcs, now))
		}
		if d.Inside, err = insideOf(rd, c.CID, svcs); err != nil {
			return err
		}
		for _, svc := range svcs {
			sd, err := s.serviceDoc(rd, svc, now)
			if err != nil {
				return err
			}
			d.VPNServices = append(d.VPNServices, sd)
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) handleNodes(w http.ResponseWriter, r *http.Request, p *principal) {
	out := []api.Node{}
	now := s.now()
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		c, err := cluster(rd, p, r.PathValue("cid"), noVerb)
		if err != nil {
			return err
		}
		nodes, svcs, err := nodesAndServices(rd, c.CID)
		for _, n := range nodes {
			out = append(out, s.nodeDoc(n, svcs, now))
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sortNodes(out)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleNode(w http.ResponseWriter, r *http.Request, p *principal) {
	var out api.Node
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		c, n, err := clusterNode(rd, p, r.PathValue("cid"), r.PathValue("nid"), noVerb)
		if err != nil {
			return err
		}
		svcs, err := rd.Services(c.CID)
		out = s.nodeDoc(n, svcs, s.now())
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleNodeIngress sets a node's declared ingress address and publication
// (runos nodes ingress). Devices dialing the node are told at once.
func (s *Server) handleNodeIngress(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.NodeIngressRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	var out api.Node
	err := s.update(r.Context(), func(tx store.Writer) error {
		c, n, err := clusterNode(tx, p, r.PathValue("cid"), r.PathValue("nid"), policy.ManageNodes)
		if err != nil {
			return err
		}
		nodes, err := tx.Nodes(c.CID)
		if err != nil {
			return err
		}
		changed, e := rules.ApplyNodeIngress(c, nodes, n, req)
		if e != nil {
			return e
		}
		if err := tx.UpdateNode(changed); err != nil {
			return err
		}
		svcs, err := tx.Services(c.CID)
		if err != nil {
			return err
		}
		if changed.Ingress() != n.Ingress() {
			// The endpoint of a service hosted (or about to be) here changes.
			tx.Touch(hub.Cluster(c.CID))
			for _, svc := range svcs {
				tx.Touch(hub.Service(svc.ID))
			}
		}
		out = s.nodeDoc(changed, svcs, s.now())
		s.log.Info("node ingress set", "cid", c.CID, "nid", n.NID, "ingress", out.IngressIP, "published", out.Published)
		pub := "published"
		if !out.Published {
			pub = "not published"
		}
		return s.record(tx, r, p, audit.Entry{AIDs: []string{c.AID}, Kind: audit.IngressChanged, CID: c.CID, Target: n.NID,
			Outcome: fmt.Sprintf("ingress %s, %s", orNone(out.IngressIP), pub)})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDeleteNode(w http.ResponseWriter, r *http.Request, p *principal) {
	reset := r.URL.Query().Get("resetCluster") == "true"
	err := s.update(r.Context(), func(tx store.Writer) error {
		c, n, err := clusterNode(tx, p, r.PathValue("cid"), r.PathValue("nid"), policy.ManageNodes)
		if err != nil {
			return err
		}
		nodes, svcs, moves, err := nodeContext(tx, c.CID)
		if err != nil {
			return err
		}
		if e := rules.CheckDeleteNode(c, nodes, svcs, moves, n, reset); e != nil {
			return e
		}
		if err := tx.DeleteNode(c.CID, n.NID); err != nil {
			return err
		}
		if reset && n.IsControlPlane() {
			c.IsConfigured = false
			if err := tx.UpdateCluster(c); err != nil {
				return err
			}
		}
		tx.Touch(hub.Gateway(c.CID, n.NID), hub.Cluster(c.CID))
		s.log.Info("node deleted", "cid", c.CID, "nid", n.NID, "resetCluster", reset)
		outcome := "deleted"
		if reset && n.IsControlPlane() {
			outcome += "; the cluster was reset"
		}
		return s.record(tx, r, p, audit.Entry{AIDs: []string{c.AID}, Kind: audit.NodeDeleted, CID: c.CID, Target: n.NID, Outcome: outcome})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// nodesAndServices reads a cluster's nodes and services, what a node's
// document and most rules about nodes need together.
func nodesAndServices(rd store.Reader, cid string) ([]model.Node, []model.Service, error) {
	nodes, err := rd.Nodes(cid)
	if err != nil {
		return nil, nil, err
	}
	svcs, err := rd.Services(cid)
	if err != nil {
		return nil, nil, err
	}
	return nodes, svcs, nil
}

func nodeContext(rd store.Reader, cid string) ([]model.Node, []model.Service, []model.Move, error) {
	nodes, svcs, err := nodesAndServices(rd, cid)
	if err != nil {
		return nil, nil, nil, err
	}
	var moves []model.Move
	for _, svc := range svcs {
		m, err := rd.InFlightMove(svc.ID)
		if err == nil {
			moves = append(moves, m)
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, nil, nil, err
		}
	}
	return nodes, svcs, moves, nil
}

func (s *Server) handleDeletePreflight(w http.ResponseWriter, r *http.Request, p *principal) {
	var out api.DeletePreflight
	reset := r.URL.Query().Get("resetCluster") == "true"
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		c, n, err := clusterNode(rd, p, r.PathValue("cid"), r.PathValue("nid"), policy.ManageNodes)
		if err != nil {
			return err
		}
		nodes, svcs, moves, err := nodeContext(rd, c.CID)
		out = rules.DeletePreflight(c, nodes, svcs, moves, n, reset)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
