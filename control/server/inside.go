package server

import (
	"errors"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// What lies inside a cluster (issue 21): reported by its gateways from
// their nodes' configuration, kept per cluster, shown by GET
// /v1/clusters/{cid} and handed to devices and gateways with the cluster's
// mapped range. The nodes of one cluster are configured alike; the last
// report that says something different wins.

// insideOf is cid's inside as documents show it, with the mapped range of
// its VPN service (nil when nothing was reported).
func insideOf(r store.Reader, cid string, svcs []model.Service) (*api.ClusterInside, error) {
	in, err := r.ClusterInside(cid)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if len(svcs) > 0 {
		if m, err := api.MappedRange(svcs[0].SubnetIndex + 1); err == nil {
			in.Mapped = m.String()
		}
	}
	return &in, nil
}

// checkInside refuses a report whose inside is malformed.
func checkInside(rep *api.GatewayReport) *api.Error {
	if rep.Inside == nil {
		return nil
	}
	rep.Inside.Mapped = "" // control's to say
	if err := rep.Inside.Check(); err != nil {
		return errInvalid("inside: %v", err)
	}
	return nil
}

// recordInside keeps what the node's gateway reported lies inside its
// cluster; a change reaches every device and gateway of the cluster.
func recordInside(tx store.Writer, n model.Node, rep api.GatewayReport) error {
	if rep.Inside == nil {
		return nil
	}
	old, err := tx.ClusterInside(n.CID)
	if err == nil && old == *rep.Inside {
		return nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := tx.PutClusterInside(n.CID, *rep.Inside); err != nil {
		return err
	}
	nodes, err := tx.Nodes(n.CID)
	if err != nil {
		return err
	}
	tx.Touch(hub.Cluster(n.CID))
	for _, o := range nodes {
		tx.Touch(hub.Gateway(n.CID, o.NID))
	}
	return nil
}
