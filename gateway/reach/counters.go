package reach

import (
	"encoding/json"
	"fmt"
)

// parseCounters reads the named counters of `nft -j list counters`: the
// drops by reason (a parser of the kernel's text, portable so it is tested
// on every system that builds the package).
func parseCounters(b []byte) (map[string]uint64, error) {
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Name    string `json:"name"`
				Packets uint64 `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("nft counters: %w", err)
	}
	out := map[string]uint64{}
	for _, e := range doc.Nftables {
		if e.Counter != nil {
			out[e.Counter.Name] = e.Counter.Packets
		}
	}
	return out, nil
}
