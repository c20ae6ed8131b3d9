package localapi

import "time"

// Metrics are the daemon's own counters since it started (Status.Metrics,
// `runos vpn status --json` under metrics).
type Metrics struct {
	Since    time.Time        `json:"since"` // when the daemon started counting
	Clusters []ClusterMetrics `json:"clusters"`
	DNS      DNSMetrics       `json:"dns"`
	// ControlReconnects counts the times the daemon's conversation with
	// control broke and was taken up again.
	ControlReconnects uint64 `json:"controlReconnects"`
}

// ClusterMetrics are one cluster's counters, over every server it had (a
// move changes the server, not the counters).
type ClusterMetrics struct {
	CID        string `json:"cid"`
	Handshakes uint64 `json:"handshakes"` // completed handshakes seen on the device
	RxBytes    uint64 `json:"rxBytes"`    // received through the tunnel from the cluster
	TxBytes    uint64 `json:"txBytes"`    // sent through the tunnel to the cluster
	// Reconnects counts the times the peer came up again after being
	// down (a handshake gone stale, the network back) or up with a new
	// server (a move): once each.
	Reconnects uint64 `json:"reconnects"`
	// ToRelay and ToDirect count the path's switches (the daemon's log
	// says why each one happened).
	ToRelay  uint64 `json:"toRelay"`
	ToDirect uint64 `json:"toDirect"`
	// HandshakeRetries counts the handshake initiations that went
	// unanswered and were sent again (the tunnel re-creates a peer with no
	// handshake after 100 ms, 200 ms …): the sign of an initiation that
	// reached the server before it held the device, or a lossy path.
	HandshakeRetries uint64 `json:"handshakeRetries"`
}

// DNSMetrics count the queries the daemon's split-DNS forwarder handled
// (resolv.conf mode, and the splitter of systemd-resolved mode with two or
// more clusters; other modes leave resolving to the OS, and these stay 0).
type DNSMetrics struct {
	Answered  uint64 `json:"answered"`  // answers sent to programs on this machine
	Forwarded uint64 `json:"forwarded"` // queries sent on to a cluster's or the original servers
}

// Logs are the daemon's most recent log lines (GET /v1/logs).
type Logs struct {
	Lines   []string `json:"lines"`   // oldest first
	Dropped uint64   `json:"dropped"` // older lines no longer kept
}

// ProbeRequest asks for a fresh handshake with a cluster's server.
type ProbeRequest struct {
	CID string `json:"cid"`
	// TimeoutMs bounds the wait for the handshake; 0 means 6 s (the
	// daemon caps it at 15 s).
	TimeoutMs int `json:"timeoutMs,omitempty"`
}

// ProbeResult is what a probe found.
type ProbeResult struct {
	CID      string `json:"cid"`
	Endpoint string `json:"endpoint"`
	// OK: the server answered a handshake initiation sent now, over UDP
	// (or the path in use) to Endpoint. Within 5 s of the last handshake
	// WireGuard starts no other: the probe waits for that first.
	OK            bool      `json:"ok"`
	LastHandshake time.Time `json:"lastHandshake"`
	Ms            float64   `json:"ms"`              // from the request to the handshake seen
	Error         string    `json:"error,omitempty"` // why not
}
