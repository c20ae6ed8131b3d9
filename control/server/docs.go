package server

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/lru"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/rules"
	"github.com/runos/vpn/control/store"
)

// This file turns records into the wire documents of api.

func clusterDoc(c model.Cluster) api.Cluster {
	return api.Cluster{CID: c.CID, AID: c.AID, Name: c.Name, Domain: c.Domain(), IsConfigured: c.IsConfigured, UserVPN: c.UserVPN}
}

func hostsVPN(svcs []model.Service, nid string) bool {
	for _, s := range svcs {
		if s.NodeID == nid {
			return true
		}
	}
	return false
}

func addrString(a interface {
	IsValid() bool
	String() string
}) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func (s *Server) nodeDoc(n model.Node, svcs []model.Service, now time.Time) api.Node {
	roles := n.Roles
	if roles == nil {
		roles = []string{}
	}
	return api.Node{
		NID: n.NID, CID: n.CID, Name: n.Name, Roles: roles,
		Status:            s.heartbeats().Status(n, now),
		IngressIP:         addrString(n.Ingress()),
		DeclaredIngressIP: addrString(n.DeclaredIngress),
		PublicIP:          addrString(n.Public()),
		Published:         n.Published,
		HostsVPN:          hostsVPN(svcs, n.NID),
		LastHeartbeat:     n.LastHeartbeat,
	}
}

// serviceDoc builds a VPNService inside r's snapshot.
func (s *Server) serviceDoc(r store.Reader, svc model.Service, now time.Time) (api.VPNService, error) {
	d := api.VPNService{ID: svc.ID, CID: svc.CID, Name: svc.Name, NodeID: svc.NodeID, Port: svc.Port,
		State: svc.State, Error: svc.Error, PublicKey: svc.PublicKey,
		Subnet: svc.Subnet.String(), Address: svc.Address().String()}
	n, err := r.Node(svc.CID, svc.NodeID)
	if err != nil {
		return d, err
	}
	if ep, kind, ok := rules.Endpoint(n, svc.Port); ok {
		d.Endpoint, d.AddressKind = ep, kind
	}
	d.RelayURL, d.Relay = svc.RelayURL, rules.RelayURL(n, svc)
	if d.Devices, err = r.PeerCount(svc.CID, now); err != nil {
		return d, err
	}
	if m, err := r.LatestMove(svc.ID); err == nil {
		d.LatestMoveID = m.ID
	} else if !errors.Is(err, store.ErrNotFound) {
		return d, err
	}
	d.Version, err = r.TopicVersion(hub.Service(svc.ID))
	return d, err
}

func moveDoc(m model.Move, version uint64) api.Move {
	d := api.Move{ID: m.ID, CID: m.CID, ServiceID: m.ServiceID, FromNodeID: m.FromNodeID, TargetNodeID: m.TargetNodeID,
		State: m.State, Error: m.Error, Endpoint: m.Endpoint, AddressKind: m.AddressKind, Warnings: m.Warnings,
		Devices: api.MoveDevices{Total: m.Total, Switched: min(m.Switched, m.Total)}, SwitchMs: m.SwitchMs,
		StartedAt: m.StartedAt, FinishedAt: m.FinishedAt, Steps: m.Steps, Version: version}
	if d.Warnings == nil {
		d.Warnings = []string{}
	}
	if d.Steps == nil {
		d.Steps = []api.MoveStep{}
	}
	return d
}

// vpnConfig is what a device joined to c needs; ok is false when the
// cluster has no WireGuard service.
func vpnConfig(c model.Cluster, svcs []model.Service, host model.Node) (api.VPNConfig, bool) {
	if len(svcs) == 0 {
		return api.VPNConfig{}, false
	}
	svc := svcs[0]
	v := api.VPNConfig{ServiceID: svc.ID, NodeID: svc.NodeID, PublicKey: svc.PublicKey,
		Subnet: svc.Subnet.String(), Address: svc.Address().String(), DNS: svc.Address().String(),
		Domains: c.Domains()}
	if ep, _, ok := rules.Endpoint(host, svc.Port); ok {
		v.Endpoint = ep
	}
	v.Relay = rules.RelayURL(host, svc)
	v.Ready = svc.State == api.ServiceServing && v.PublicKey != "" && v.Endpoint != ""
	v.ServerStartedAt = host.GatewayStartedAt
	return v, true
}

// clusterCache keeps each cluster's ClusterConfig as of a version of its
// topic: a move changes one cluster and wakes every device joined to it,
// and they all need the same document. singleflight makes the first waker
// build it while the others wait for that one read.
type clusterCache struct {
	mu sync.Mutex
	m  map[string]clusterEntry
	sf singleflight.Group
}

type clusterEntry struct {
	version uint64
	topic   *hub.Topic // cluster:<cid>
	cfg     api.ClusterConfig
	json    json.RawMessage // cfg encoded once, for every device's map
	ok      bool            // the cluster exists and has a VPN service
}

func (c *clusterCache) init() { c.m = map[string]clusterEntry{} }

// clusterConfig returns the device-facing config of cid and the version of
// cluster:<cid> it reflects.
//
// The hub's version is read after the cache, so a hit is current as of
// that read (the hub only goes up).
func (s *Server) clusterConfig(ctx context.Context, cid string) (clusterEntry, error) {
	s.clusters.mu.Lock()
	e, hit := s.clusters.m[cid]
	s.clusters.mu.Unlock()
	if hit && e.version >= e.topic.Version() {
		return e, nil
	}
	v, err, _ := s.clusters.sf.Do(cid, func() (any, error) {
		e := clusterEntry{topic: s.hub.Topic(hub.Cluster(cid))}
		// Not the first caller's context: the others share this read.
		err := s.st.View(context.WithoutCancel(ctx), func(r store.Reader) error {
			var err error
			if e.version, err = r.TopicVersion(e.topic.Name()); err != nil {
				return err
			}
			c, err := r.Cluster(cid)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
			svcs, err := r.Services(cid)
			if err != nil || len(svcs) == 0 {
				e.cfg = api.ClusterConfig{CID: c.CID, AID: c.AID, Name: c.Name, Domain: c.Domain()}
				return err
			}
			host, err := r.Node(cid, svcs[0].NodeID)
			if err != nil {
				return err
			}
			vpn, ok := vpnConfig(c, svcs, host)
			e.cfg = api.ClusterConfig{CID: c.CID, AID: c.AID, Name: c.Name, Domain: c.Domain(), VPN: vpn}
			e.ok = ok
			e.cfg.Inside, err = insideOf(r, cid, svcs)
			return err
		})
		if err != nil {
			return clusterEntry{}, err
		}
		if e.json, err = json.Marshal(e.cfg); err != nil {
			return clusterEntry{}, err
		}
		s.clusters.mu.Lock()
		if old, ok := s.clusters.m[cid]; !ok || old.version <= e.version {
			s.clusters.m[cid] = e
		}
		s.clusters.mu.Unlock()
		return e, nil
	})
	if err != nil {
		return clusterEntry{}, err
	}
	return v.(clusterEntry), nil
}

// deviceCache keeps each device's own part of its map (the device and the
// clusters it joined) as of a version of its topic, so that a woken
// long-poll reads nothing from the store unless the device itself changed.
// The least recently used device is forgotten first (control/lru).
//
// Entries are shared and never changed once stored: a newer state is a
// new entry, so a stream may keep the one it read (handleDeviceMap).
type deviceCache struct {
	c *lru.Cache[string, *deviceEntry]
}

type deviceEntry struct {
	version uint64
	topic   *hub.Topic // device:<id>
	dev     model.Device
	json    json.RawMessage // deviceDoc(dev) encoded, for the device's map
	cids    []string
}

const deviceCacheMax = 200_000

func (c *deviceCache) init() { c.c = lru.New[string, *deviceEntry](deviceCacheMax) }

// deviceState returns the device with its joined clusters and the version
// of device:<id> they reflect. As in clusterConfig, the hub's version is
// read after the cache.
func (s *Server) deviceState(ctx context.Context, id string) (*deviceEntry, error) {
	e, hit := s.devCache.c.Get(id)
	if hit && e.current() {
		return e, nil
	}
	e = &deviceEntry{topic: s.hub.Topic(hub.Device(id))}
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		if e.version, err = r.TopicVersion(e.topic.Name()); err != nil {
			return err
		}
		if e.dev, err = r.Device(id); err != nil {
			return err
		}
		e.cids, err = r.DeviceClusters(id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if e.json, err = json.Marshal(deviceDoc(e.dev)); err != nil {
		return nil, err
	}
	s.devCache.c.Update(id, func(old *deviceEntry, ok bool) (*deviceEntry, bool) {
		if ok && old.version > e.version {
			return old, true
		}
		return e, true
	})
	return e, nil
}

// current reports whether the entry is still the device's state: nothing
// has touched its topic since it was read.
func (e *deviceEntry) current() bool { return e.version >= e.topic.Version() }

func sortNodes(ns []api.Node) {
	sort.Slice(ns, func(i, j int) bool { return ns[i].NID < ns[j].NID })
}
