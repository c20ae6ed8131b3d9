package state

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
)

// FuzzDeviceMap feeds control's device map, as it comes off the wire, to
// the derivation: whatever control sends, the daemon must not crash, must
// configure only clean, non-colliding peers inside the VPN's pools, route
// only DNS domains under each cluster's own domain, and must say why it
// skipped the rest. Seeds: above, and testdata/fuzz/FuzzDeviceMap.
func FuzzDeviceMap(f *testing.F) {
	for _, m := range []*api.DeviceMap{dmap(ky3n1), dmap(ky3n1, xym), dmap(ky3n2, ky3n1), dmap()} {
		b, _ := json.Marshal(m)
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"device":{"address":"::ffff:1.2.3.4"},"clusters":[{"cid":"ky3","vpn":{"ready":true,"publicKey":"` + key1.String() + `","endpoint":"[::1]:1","subnet":"::/1"}}]}`))
	f.Add([]byte(`{"clusters":[{"cid":"KY3"},{"cid":"ky3"},{"cid":"ky3"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m api.DeviceMap
		if json.Unmarshal(b, &m) != nil {
			return
		}
		in := base()
		in.Prefs = signedInPrefs()
		for _, c := range m.Clusters {
			in.Prefs.Wanted = append(in.Prefs.Wanted, c.CID)
		}
		in.Map = &m
		st := Derive(&in)
		plan := Want(&in)
		_ = NextChange(&in)
		if e := ReadEvery(&in); e < readFastest || e > readIdle {
			t.Fatalf("read every %v", e)
		}
		states := map[string]string{}
		for _, c := range st.Clusters {
			states[c.CID] = c.State
		}
		seen := map[[32]byte]bool{}
		for i, p := range plan.Tunnel.Peers {
			if states[p.CID] == "error" {
				t.Fatalf("peer %s configured while its status is error", p.CID)
			}
			if seen[p.PublicKey] {
				t.Fatalf("key configured twice")
			}
			seen[p.PublicKey] = true
			if len(p.AllowedIPs) != 1 || !p.Endpoint.IsValid() {
				t.Fatalf("peer %+v", p)
			}
			for _, q := range plan.Tunnel.Peers[:i] {
				if q.AllowedIPs[0].Overlaps(p.AllowedIPs[0]) {
					t.Fatalf("overlapping allowed IPs %v %v", q.AllowedIPs, p.AllowedIPs)
				}
			}
		}
		for _, r := range append(plan.Tunnel.Routes, plan.Tunnel.Addresses...) {
			if (Trust{}).checkRoute(r) != nil {
				t.Fatalf("route or address %s outside the VPN's pools planned", r)
			}
		}
		owns := map[string]string{}
		seenCID := map[string]bool{}
		for _, c := range m.Clusters { // the first of a cid is the one used
			if seenCID[c.CID] {
				continue
			}
			seenCID[c.CID] = true
			if d, err := ownDomain(c); err == nil {
				owns[c.CID] = d
			}
		}
		for _, r := range plan.DNS {
			for _, d := range r.Domains {
				if checkDomain(d) != nil || !strings.Contains(d, ".") {
					t.Fatalf("bad domain %q planned", d)
				}
				own := owns[r.CID]
				if d = strings.ToLower(strings.TrimSuffix(d, ".")); own == "" || d != own && !strings.HasSuffix(d, "."+own) {
					t.Fatalf("domain %q of %s planned, not under its own domain %q", d, r.CID, own)
				}
			}
		}
		if _, err := json.Marshal(st); err != nil {
			t.Fatal(err)
		}
	})
}
