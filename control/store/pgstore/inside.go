package pgstore

import (
	"fmt"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// What lies inside a cluster (issue 21): one JSON document per cluster.

func (t *tx) ClusterInside(cid string) (api.ClusterInside, error) {
	var in api.ClusterInside
	var doc string
	if err := one(t.row("SELECT inside FROM cluster_inside WHERE cid = $1", cid).Scan(&doc), "inside of cluster "+cid); err != nil {
		return in, err
	}
	return in, sqlcol.FromJSON(doc, &in)
}

func (t *tx) PutClusterInside(cid string, in api.ClusterInside) error {
	in.Mapped = "" // control derives it; never kept
	if _, err := t.exec("INSERT INTO cluster_inside (cid, inside) VALUES ($1, $2) ON CONFLICT (cid) DO UPDATE SET inside = excluded.inside",
		cid, sqlcol.JSON(in)); err != nil {
		return fmt.Errorf("inside of cluster %s: %w", cid, classify(err))
	}
	return nil
}
