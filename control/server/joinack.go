package server

import (
	"context"
	"errors"
	"sync"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// A join answers only once the serving gateway holds the device.
//
// Before, control answered the join as soon as it had committed it; the
// daemon configured the peer and sent its first initiation while the
// gateway was still taking its new map, and an initiation that arrived
// first was dropped (about 5 % of connects in the lab), leaving the daemon
// to its 100 ms re-try (or WireGuard's 5 s one). Of the two cures the issue
// names, this one is chosen: the daemon re-initiating when the gateway
// reports the peer added would need a new push to the device and a second
// handshake for every loser, while control already gets the fact it needs
// (each report carries the map version it reflects) and already makes a
// move's switch wait for it (onTargetReport waits for the target's report
// of the prepare map before any device is told the new node; a device that
// joins during the move waits for the target too, servingNodes), so the
// ordering is fixed in one place, on the server, for every client.
//
// How it works across replicas: a report that shows the gateway has acted
// on its latest map touches GatewayAck(cid, nid) in the report's own
// transaction, once per map change (ackMap). A join then waits until that
// topic's version passes the gateway topic's version it saw after its
// commit: the hub publishes every replica's commits, so the join and the
// report need not land on the same replica. The wait is bounded
// (Config.JoinAckTimeout): a gateway that is slow or gone costs a join at
// most that, the join still succeeds, and the timeout is counted.

// A join on the replica the gateway reports to does not wait for the
// report's commit either (an fsync, 1.5–3 ms here, more under load): the
// report's map version is noted in memory as it arrives (mapReports), and
// a join waiting for a version it reaches answers. The ack topic is still
// touched in the report's transaction, for joins waiting on other
// replicas. What the join waits for is a fact about the gateway, not the
// report's facts being durable: a replica that dies before the commit
// takes its waiting joins with it.

// mapReports are, per node, the newest map version its gateway's reports
// to this replica said it had acted on, as the reports arrive.
type mapReports struct {
	mu      sync.Mutex
	v       map[string]uint64 // by cid/nid
	changed chan struct{}     // closed and replaced on every raise
}

// raise notes a report of version from node cid/nid.
func (r *mapReports) raise(cid, nid string, version uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := cid + "/" + nid; version > r.v[k] {
		r.v[k] = version
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

// at is node cid/nid's newest reported version, and a channel closed when
// any node's rises.
func (r *mapReports) at(cid, nid string) (uint64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.v[cid+"/"+nid], r.changed
}

// ackMap touches the node's ack topic when rep says its gateway acted on
// the newest map control has for it and no ack since that map's change says
// so already (the same report again bumps nothing). Inside the report's
// transaction.
func ackMap(tx store.Writer, n model.Node, rep api.GatewayReport) error {
	g, err := tx.TopicVersion(hub.Gateway(n.CID, n.NID))
	if err != nil || rep.MapVersion < g {
		return err
	}
	a, err := tx.TopicVersion(hub.GatewayAck(n.CID, n.NID))
	if err != nil || a > g {
		return err
	}
	tx.Touch(hub.GatewayAck(n.CID, n.NID))
	return nil
}

// servingNodes are the nodes whose gateways a joining device handshakes
// with: the service's node, when it serves, and the target of a move in
// flight (the device is told it at the switch, which may come before the
// target's report of the map with this device: the switch waits only for
// the map the move began with). A node whose gateway no longer reports is
// left out: no wait could help.
func (s *Server) servingNodes(rd store.Reader, svcs []model.Service) ([]string, error) {
	if len(svcs) == 0 || svcs[0].State != api.ServiceServing {
		return nil, nil
	}
	svc := svcs[0]
	nids := []string{svc.NodeID}
	if mv, err := rd.InFlightMove(svc.ID); err == nil {
		nids = append(nids, mv.TargetNodeID)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	var out []string
	for _, nid := range nids {
		n, err := rd.Node(svc.CID, nid)
		if errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		if s.now().Sub(n.LastHeartbeat) <= s.cfg.HeartbeatTimeout {
			out = append(out, nid)
		}
	}
	return out, nil
}

// awaitGateways waits for each of nids in turn (awaitGateway), all within
// one Config.JoinAckTimeout.
func (s *Server) awaitGateways(ctx context.Context, cid string, nids []string) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.JoinAckTimeout)
	defer cancel()
	for _, nid := range nids {
		s.awaitGateway(ctx, cid, nid)
	}
}

// awaitGateway waits, after a join's commit, until the gateway of nid has
// acted on a map at least as new as the one the join left it (see above),
// or ctx ends: at its deadline the timeout is counted. It reports whether
// the ack came.
func (s *Server) awaitGateway(ctx context.Context, cid, nid string) bool {
	target := s.hub.Topic(hub.Gateway(cid, nid)).Version()
	ack := s.hub.Topic(hub.GatewayAck(cid, nid))
	for {
		w := s.hub.Watch(ack) // registered before the check: a publish after it wakes us
		reported, raised := s.reported.at(cid, nid)
		if ack.Version() > target || reported >= target {
			w.Stop()
			s.cfg.Metrics.JoinAcked("acked")
			return true
		}
		select {
		case <-raised:
		case <-w.C():
		case <-ctx.Done():
			w.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				s.cfg.Metrics.JoinAcked("timeout")
				s.log.Warn("join answered before the gateway acknowledged the device", "cid", cid, "node", nid,
					"bound", s.cfg.JoinAckTimeout.String())
			}
			return false
		}
		w.Stop()
	}
}
