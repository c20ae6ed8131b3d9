package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/atomicfile"
)

// A gateway keeps the last map control sent it (in its state directory,
// 0600, written atomically), so that started again while control is away
// (a node reboot, a crash, an upgrade during an outage) it serves its peers
// at once from it instead of coming back with none. Control's next map
// replaces it. Every peer carries its session's expiry: a peer is served
// only until then, kept map or not, so a restart never lets a session
// outlive itself; a kept peer with no expiry (a map of an older control)
// is not served from the file.

// KeptFile is the kept map's name in the state directory.
const KeptFile = "last-map.json"

// keptMaxSize bounds the file: a map of thousands of peers is a few
// hundred kilobytes.
const keptMaxSize = 8 << 20

// keptMap is the file's content.
type keptMap struct {
	ReceivedAt time.Time      `json:"receivedAt"`
	Map        api.GatewayMap `json:"map"`
	// Endpoints is where each peer (by public key) last sent from: after a
	// restart the gateway handshakes to them first (issue 22). Absent in
	// files of older gateways; entries that do not parse are ignored.
	Endpoints map[string]string `json:"endpoints,omitempty"`
}

// endpoints are k's endpoints that parse, by key.
func (k keptMap) endpoints() map[wgtypes.Key]netip.AddrPort {
	out := make(map[wgtypes.Key]netip.AddrPort, len(k.Endpoints))
	for ks, es := range k.Endpoints {
		key, err := wgtypes.ParseKey(ks)
		ep, err2 := netip.ParseAddrPort(es)
		if err == nil && err2 == nil && ep.IsValid() && ep.Port() != 0 {
			out[key] = ep
		}
	}
	return out
}

func endpointStrings(eps map[wgtypes.Key]netip.AddrPort) map[string]string {
	if len(eps) == 0 {
		return nil
	}
	out := make(map[string]string, len(eps))
	for k, ep := range eps {
		out[k.String()] = ep.String()
	}
	return out
}

// parseKept reads a kept map for node, refusing what this gateway would
// not have written: too large, not one object, another node's, or a map
// planFor refuses.
func parseKept(b []byte, node string) (keptMap, error) {
	var k keptMap
	if len(b) > keptMaxSize {
		return k, fmt.Errorf("%d bytes, more than the %d a kept map may have", len(b), keptMaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&k); err != nil {
		return keptMap{}, err
	}
	if dec.More() {
		return keptMap{}, errors.New("more than one JSON value")
	}
	if k.ReceivedAt.IsZero() {
		return keptMap{}, errors.New("no time of receipt")
	}
	if node != "" && k.Map.NodeID != node {
		return keptMap{}, fmt.Errorf("the map of node %q, not %q", k.Map.NodeID, node)
	}
	if _, err := planFor(&k.Map); err != nil {
		return keptMap{}, err
	}
	return k, nil
}

// loadKept reads the kept map in dir; ok is false when there is none. A
// file that does not parse is removed and reported.
func loadKept(dir, node string) (k keptMap, ok bool, err error) {
	ok, err = atomicfile.Load(filepath.Join(dir, KeptFile), keptMaxSize, func(b []byte) (err error) {
		k, err = parseKept(b, node)
		return err
	})
	if err != nil {
		return keptMap{}, false, fmt.Errorf("the kept map: %w", err)
	}
	return k, ok, nil
}

func saveKept(dir string, k keptMap) error {
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, KeptFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("keep the map for restarts without control: %w", err)
	}
	return nil
}

// unexpired is m without the peers whose session ended by now (and, for
// a kept map, without those whose end is unknown), and the next instant a
// peer's session ends (zero: none).
func unexpired(m *api.GatewayMap, now time.Time, kept bool) (*api.GatewayMap, time.Time) {
	if m == nil || m.Serve == nil {
		return m, time.Time{}
	}
	var next time.Time
	live := func(p api.GatewayPeer) bool {
		if p.ExpiresAt.IsZero() {
			return !kept
		}
		if !p.ExpiresAt.After(now) {
			return false
		}
		if next.IsZero() || p.ExpiresAt.Before(next) {
			next = p.ExpiresAt
		}
		return true
	}
	if !slices.ContainsFunc(m.Serve.Peers, func(p api.GatewayPeer) bool { return !live(p) }) {
		return m, next
	}
	out, serve := *m, *m.Serve
	serve.Peers = nil
	next = time.Time{}
	for _, p := range m.Serve.Peers {
		if live(p) {
			serve.Peers = append(serve.Peers, p)
		}
	}
	out.Serve = &serve
	return &out, next
}

// restoreKept serves the kept map, if there is one for this node, until
// control's first map replaces it.
func (a *agent) restoreKept() {
	if a.cfg.StateDir == "" {
		return
	}
	k, ok, err := loadKept(a.cfg.StateDir, a.cfg.NodeID)
	if err != nil {
		a.log.Warn("the kept map", "err", err)
	}
	if !ok {
		return
	}
	peers := 0
	if k.Map.Serve != nil {
		peers = len(k.Map.Serve.Peers)
	}
	a.log.Info("serving the kept map until control answers", "version", k.Map.Version,
		"of", k.ReceivedAt.UTC().Format(time.RFC3339), "peers", peers)
	a.want, a.kept, a.keptAt, a.onDisk = &k.Map, true, k.ReceivedAt, &k.Map
	a.endpoints = k.endpoints()
	a.reachFirst = maps.Clone(a.endpoints)
	a.reconcile()
}

// Reacher is a Server that can handshake first to devices at their last
// endpoints (*wgserver.Server).
type Reacher interface {
	Reach(map[wgtypes.Key]netip.AddrPort) error
}

// reachKept, once the kept map's peers are on the server, handshakes to
// each at the endpoint it was last seen at: the devices' sessions died
// with the old server, and waiting for their handshake retries leaves the
// tunnel dead for 5 s or more.
func (a *agent) reachKept() {
	eps := a.reachFirst
	a.reachFirst = nil
	r, ok := a.srv.(Reacher)
	if len(eps) == 0 || !ok {
		return
	}
	a.log.Info("handshaking first to the kept map's devices", "devices", len(eps))
	if err := r.Reach(eps); err != nil {
		a.log.Warn("handshake first to the kept map's devices", "err", err)
	}
}

// keepEndpoints notes where the served peers last sent from and writes
// the kept map again when that moved (a new device, a roam): a restart
// then knows where to reach them. A peer not served any more goes.
func (a *agent) keepEndpoints(seen map[wgtypes.Key]netip.AddrPort) {
	if a.cfg.StateDir == "" || a.want == nil || a.applied == nil || a.keptAt.IsZero() {
		return
	}
	next := make(map[wgtypes.Key]netip.AddrPort, len(a.applied.peerIDs))
	for k := range a.applied.peerIDs {
		if a.cfg.Relay != nil && a.cfg.Relay.Relayed(k) {
			continue // its endpoint is a relay stream's TCP address: the device comes back over the relay
		}
		if ep, ok := seen[k]; ok {
			next[k] = ep
		} else if ep, ok := a.endpoints[k]; ok {
			next[k] = ep
		}
	}
	if maps.Equal(next, a.endpoints) {
		return
	}
	a.endpoints = next
	if err := saveKept(a.cfg.StateDir, keptMap{ReceivedAt: a.keptAt, Map: *a.want, Endpoints: endpointStrings(next)}); err != nil {
		a.onDisk = nil
		a.log.Warn("keep the devices' endpoints", "err", err)
		return
	}
	a.onDisk = a.want
}

// keep writes m as the kept map (a failure is logged: the next map tries
// again, and without the file a restart only waits for control).
func (a *agent) keep(m *api.GatewayMap) {
	if a.cfg.StateDir == "" {
		return
	}
	a.keptAt = time.Now().UTC()
	if err := saveKept(a.cfg.StateDir, keptMap{ReceivedAt: a.keptAt, Map: *m, Endpoints: endpointStrings(a.endpoints)}); err != nil {
		a.onDisk = nil // whatever is there now, this run does not know it
		a.log.Warn("keep the map", "err", err)
		return
	}
	a.onDisk = m
}

// keepsLater reports whether next may be written to the kept file after it
// is applied and reported, rather than before: only when it adds peers to
// prev (what the file holds) and changes nothing else. A device's join
// waits for the gateway's report (control/server/joinack.go), and the
// file's fsync (1.5–4 ms here) was the largest part of that wait. A crash
// between the apply and the write then restarts from prev, which lacks the
// new devices until control answers: it never brings back a peer that a
// removal, a shorter session or a narrower policy took away, which is why
// every other change is still written first.
func keepsLater(prev, next *api.GatewayMap) bool {
	if prev == nil || next == nil || prev.Serve == nil || next.Serve == nil ||
		prev.NodeID != next.NodeID || prev.CID != next.CID {
		return false
	}
	ps, ns := *prev.Serve, *next.Serve
	ps.Peers, ns.Peers = nil, nil
	if !reflect.DeepEqual(ps, ns) {
		return false
	}
	have := make(map[string]api.GatewayPeer, len(next.Serve.Peers))
	for _, p := range next.Serve.Peers {
		have[p.PublicKey] = p
	}
	for _, p := range prev.Serve.Peers {
		if q, ok := have[p.PublicKey]; !ok || !reflect.DeepEqual(p, q) {
			return false
		}
	}
	return true
}

// alarm is a timer for one instant that can be moved, with a nil channel
// while unset (a select on it then never fires).
type alarm struct {
	t  *time.Timer
	at time.Time
}

func newAlarm() *alarm { return &alarm{} }

func (a *alarm) set(at time.Time) {
	if at.Equal(a.at) {
		return
	}
	a.stop()
	a.at = at
	if !at.IsZero() {
		a.t = time.NewTimer(max(time.Until(at), 0))
	}
}

func (a *alarm) c() <-chan time.Time {
	if a.t == nil {
		return nil
	}
	return a.t.C
}

func (a *alarm) stop() {
	if a.t != nil {
		a.t.Stop()
		a.t = nil
	}
	a.at = time.Time{}
}
