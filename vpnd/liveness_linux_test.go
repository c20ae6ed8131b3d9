package vpnd

import (
	"context"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/internal/wgtest"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestDaemonPeerUpFollowsTheServer: with the real daemon and a stock
// WireGuard server, an idle healthy tunnel stays peerUp (the probes keep it
// answered); when the server stops answering (its node's link goes down,
// as a dead node does) peerUp turns false within 20 s with the error naming
// node, endpoint and silence; when it answers again, peerUp comes back.
func TestDaemonPeerUpFollowsTheServer(t *testing.T) {
	if part := wgtest.Inside(); part != "" {
		insideDaemon(t, part)
		return
	}
	l := newLab(t)
	l.start()
	l.signIn(t)
	if _, err := l.client.Connect(context.Background(), "ky3"); err != nil {
		t.Fatal(err)
	}
	l.waitStatus("ky3 up", peerUp("ky3"))

	// Idle for longer than the silence that counts: peerUp never drops.
	ctx, cancel := context.WithTimeout(context.Background(), 22*time.Second)
	defer cancel()
	err := l.client.Watch(ctx, func(st *localapi.Status) bool {
		if c := cluster(*st, "ky3"); !c.PeerUp {
			t.Errorf("an idle, healthy tunnel went down: %+v", c)
			return false
		}
		return true
	})
	if ctx.Err() == nil {
		t.Fatalf("the watch ended early: %v", err)
	}

	node := l.servers["ky3/n1"].NS
	cut := time.Now()
	node.MustExec("ip", "link", "set", "eth0", "down")
	st := l.waitStatus("ky3 down", func(st *localapi.Status) bool { return !cluster(*st, "ky3").PeerUp })
	took := time.Since(cut)
	c := cluster(*st, "ky3")
	t.Logf("server silent → peerUp false in %v: %q", took, c.Error)
	if took > 20*time.Second {
		t.Errorf("peerUp turned false %v after the server stopped answering, want within 20 s", took)
	}
	if !regexp.MustCompile(`^no answer from n1 at 10\.1\.0\.2:32768 for 1[5-9] s$`).MatchString(c.Error) || c.State != localapi.ClusterConnected {
		t.Errorf("state %s, error %q", c.State, c.Error)
	}

	back := time.Now()
	node.MustExec("ip", "link", "set", "eth0", "up")
	l.waitStatus("ky3 up again", peerUp("ky3"))
	t.Logf("server answering again → peerUp in %v", time.Since(back))
	if page, err := l.curl("http://100.100.1.1/"); err != nil || page != "cluster=ky3 node=n1\n" {
		t.Errorf("page after the server came back: %q %v", page, err)
	}
}

// TestDaemonServerRestartRehandshakes: a VPN server that forgot the
// device's session (its gateway restarted with the same key) is handshaken
// with again as soon as control says the server started again, and the
// tunnel carries traffic within 2 s, not after WireGuard's 10-15 s.
func TestDaemonServerRestartRehandshakes(t *testing.T) {
	if part := wgtest.Inside(); part != "" {
		insideDaemon(t, part)
		return
	}
	l := newLab(t)
	l.start()
	l.signIn(t)
	ctx := context.Background()
	if _, err := l.client.Connect(ctx, "ky3"); err != nil {
		t.Fatal(err)
	}
	st := l.waitStatus("ky3 up", peerUp("ky3"))
	before := cluster(*st, "ky3").LastHandshake
	devs := l.fc.Devices()
	if len(devs) != 1 {
		t.Fatalf("devices %+v", devs)
	}
	// The restart as the server sees it: the device's session is gone.
	s := l.servers["ky3/n1"]
	if err := s.RemovePeer(devs[0].PublicKey); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPeer(devs[0].PublicKey, netip.MustParseAddr(devs[0].Address)); err != nil {
		t.Fatal(err)
	}
	cfg := l.vpnConfig("ky3", "n1")
	cfg.ServerStartedAt = time.Now().UTC()
	told := time.Now()
	l.fc.SetVPN("ky3", cfg)
	l.waitStatus("a new handshake", func(st *localapi.Status) bool {
		c := cluster(*st, "ky3")
		return c.PeerUp && c.LastHandshake.After(before)
	})
	t.Logf("server restart told → new handshake in %v", time.Since(told))
	page, err := l.curl("http://100.100.1.1/")
	took := time.Since(told)
	if err != nil || page != "cluster=ky3 node=n1\n" {
		t.Fatalf("page after the restart: %q %v", page, err)
	}
	t.Logf("server restart told → page through the tunnel in %v", took)
	if took > 2*time.Second {
		t.Errorf("traffic %v after the restart was told, want within 2 s", took)
	}
}
