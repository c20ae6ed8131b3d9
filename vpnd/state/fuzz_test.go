package state

import (
	"encoding/json"
	"testing"

	"github.com/runos/vpn/control/api"
)

// FuzzDeviceMap feeds control's device map, as it comes off the wire, to
// the derivation: whatever control sends, the daemon must not crash, must
// configure only clean, non-colliding peers, and must say why it skipped
// the rest.
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
		for _, r := range plan.DNS {
			for _, d := range r.Domains {
				if checkDomain(d) != nil {
					t.Fatalf("bad domain %q planned", d)
				}
			}
		}
		if _, err := json.Marshal(st); err != nil {
			t.Fatal(err)
		}
	})
}
