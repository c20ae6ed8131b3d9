package vpnd

import (
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/wgcfg"
)

func TestCountersFollowTheDevice(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newCounters(t0)
	ky3, xym := mustKey("ky3-server"), mustKey("xym-server")
	cfg := wgcfg.Config{Peers: []wgcfg.Peer{{CID: "ky3", PublicKey: ky3}, {CID: "xym", PublicKey: xym}}}
	read := func(peers ...wgcfg.PeerReport) { c.observeDevice(wgcfg.Report{Peers: peers}, cfg) }

	read(wgcfg.PeerReport{PublicKey: ky3, RxBytes: 100, TxBytes: 40, LastHandshake: t0},
		wgcfg.PeerReport{PublicKey: xym}) // configured, no handshake yet
	read(wgcfg.PeerReport{PublicKey: ky3, RxBytes: 150, TxBytes: 90, LastHandshake: t0}, // same handshake
		wgcfg.PeerReport{PublicKey: xym, RxBytes: 10, TxBytes: 5, LastHandshake: t0.Add(time.Second)})
	read(wgcfg.PeerReport{PublicKey: ky3, RxBytes: 30, TxBytes: 20, LastHandshake: t0.Add(2 * time.Minute)}, // re-created: counts restart
		wgcfg.PeerReport{PublicKey: xym, RxBytes: 10, TxBytes: 5, LastHandshake: t0.Add(time.Second)})
	c.observeDevice(wgcfg.Report{Err: "read failed"}, cfg) // says nothing

	m := c.snapshot(localapi.DNSMetrics{Answered: 3, Forwarded: 2})
	want := []localapi.ClusterMetrics{
		{CID: "ky3", Handshakes: 2, RxBytes: 180, TxBytes: 110},
		{CID: "xym", Handshakes: 1, RxBytes: 10, TxBytes: 5},
	}
	if len(m.Clusters) != 2 || m.Clusters[0] != want[0] || m.Clusters[1] != want[1] {
		t.Fatalf("clusters %+v, want %+v", m.Clusters, want)
	}
	if m.DNS.Answered != 3 || m.DNS.Forwarded != 2 || !m.Since.Equal(t0) {
		t.Errorf("metrics %+v", m)
	}
}

func TestCountersCountReconnects(t *testing.T) {
	c := newCounters(time.Now())
	st := func(key string, up bool) localapi.Status {
		return localapi.Status{Clusters: []localapi.ClusterStatus{{CID: "ky3", State: localapi.ClusterConnected, PeerUp: up,
			Server: localapi.Server{PublicKey: key}}}}
	}
	prev := localapi.Status{}
	for _, s := range []localapi.Status{
		st("n1", false), st("n1", true), st("n1", true), // connected: not a reconnect
		st("n1", false), st("n1", true), // down and up: 1
		st("n2", true),                  // moved with no status down in between: 2
		st("n1", false), st("n1", true), // moved, down, then up: 3, once
		{Clusters: []localapi.ClusterStatus{{CID: "ky3", State: localapi.ClusterDisconnected}}},
	} {
		c.observeStatus(prev, s)
		prev = s
	}
	if got := c.snapshot(localapi.DNSMetrics{}).Clusters; len(got) != 1 || got[0].Reconnects != 3 {
		t.Fatalf("reconnects %+v, want 3 (the first up is a connect)", got)
	}
}

func TestCountersCountPathSwitches(t *testing.T) {
	c := newCounters(time.Now())
	st := func(path string) localapi.Status {
		return localapi.Status{Clusters: []localapi.ClusterStatus{{CID: "ky3", State: localapi.ClusterConnected, Path: path}}}
	}
	prev := localapi.Status{}
	for _, s := range []localapi.Status{
		st(""), st(localapi.PathDirect), st(localapi.PathRelay), st(localapi.PathRelay), // the race won by the relay: 1 to the relay
		st(localapi.PathDirect), st(""), st(localapi.PathDirect), // back on UDP: 1; unconfigured and back: none
		st(localapi.PathRelay), // 2 to the relay
		{Clusters: []localapi.ClusterStatus{{CID: "ky3", State: localapi.ClusterDisconnected}}},
		st(localapi.PathDirect), st(localapi.PathRelay), // connected again: the race, 3 to the relay
	} {
		c.observeStatus(prev, s)
		prev = s
	}
	got := c.snapshot(localapi.DNSMetrics{}).Clusters
	if len(got) != 1 || got[0].ToRelay != 3 || got[0].ToDirect != 1 {
		t.Fatalf("path switches %+v, want 3 to the relay and 1 to direct", got)
	}
}

// The engine's count of unanswered initiations sent again (its nudges)
// adds up per cluster, across a peer tracked anew (disconnect, connect).
func TestCountersCountHandshakeRetries(t *testing.T) {
	c := newCounters(time.Now())
	ky3, xym := mustKey("ky3-server"), mustKey("xym-server")
	cfg := wgcfg.Config{Peers: []wgcfg.Peer{{CID: "ky3", PublicKey: ky3}, {CID: "xym", PublicKey: xym}}}
	read := func(peers ...wgcfg.PeerReport) { c.observeDevice(wgcfg.Report{Peers: peers}, cfg) }

	read(wgcfg.PeerReport{PublicKey: ky3}, wgcfg.PeerReport{PublicKey: xym})
	read(wgcfg.PeerReport{PublicKey: ky3, HandshakeRetries: 1}, wgcfg.PeerReport{PublicKey: xym}) // ky3's first initiation lost
	read(wgcfg.PeerReport{PublicKey: ky3, HandshakeRetries: 2}, wgcfg.PeerReport{PublicKey: xym}) // and the second
	read(wgcfg.PeerReport{PublicKey: ky3, HandshakeRetries: 2})                                   // xym disconnected
	read(wgcfg.PeerReport{PublicKey: ky3, HandshakeRetries: 2}, wgcfg.PeerReport{PublicKey: xym, HandshakeRetries: 1})

	got := c.snapshot(localapi.DNSMetrics{}).Clusters
	if len(got) != 2 || got[0].HandshakeRetries != 2 || got[1].HandshakeRetries != 1 {
		t.Fatalf("clusters %+v, want ky3 2 retries, xym 1", got)
	}
}
