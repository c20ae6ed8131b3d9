package sqlstore

import (
	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// What lies inside a cluster (issue 21): one JSON document per cluster.

func (t *tx) ClusterInside(cid string) (api.ClusterInside, error) {
	var in api.ClusterInside
	var doc string
	if err := t.one(t.row("SELECT inside FROM cluster_inside WHERE cid = ?", cid).Scan(&doc), "inside of cluster "+cid); err != nil {
		return in, err
	}
	return in, sqlcol.FromJSON(doc, &in)
}

func (t *tx) PutClusterInside(cid string, in api.ClusterInside) error {
	in.Mapped = "" // control derives it; never kept
	_, err := t.exec("INSERT INTO cluster_inside (cid, inside) VALUES (?, ?) ON CONFLICT (cid) DO UPDATE SET inside = excluded.inside",
		cid, sqlcol.JSON(in))
	return t.fail(err, "inside of cluster "+cid)
}
