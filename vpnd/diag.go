package vpnd

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/logring"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Diagnostics the local API serves to `runos vpn doctor` and `runos vpn
// bugreport`: the daemon's counters, its recent log, and a handshake probe.

const (
	probeDefault = 6 * time.Second // past wireguard-go's retry after RekeyTimeout
	probeMax     = 15 * time.Second
	rekeyTimeout = 5 * time.Second       // device.RekeyTimeout
	probeRead    = 50 * time.Millisecond // how often the probe looks for its handshake
)

// metrics is the daemon's counters now.
func (d *daemon) metrics() *localapi.Metrics {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		return nil
	}
	var q localapi.DNSMetrics
	if qc, ok := d.dns.(dnsplit.QueryCounter); ok {
		c := qc.Queries()
		q = localapi.DNSMetrics{Answered: c.Answered, Forwarded: c.Forwarded}
	}
	m := d.counts.snapshot(q)
	return &m
}

// logs is the daemon's recent log from its ring (nil: not kept).
func logs(r *logring.Ring) localapi.Logs {
	if r == nil {
		return localapi.Logs{Lines: []string{}}
	}
	lines, dropped := r.Lines()
	return localapi.Logs{Lines: lines, Dropped: dropped}
}

// probe sends a handshake initiation to cid's server now and waits until
// the device reports a handshake newer than the request, or the timeout.
// It reads the device as the daemon always does; the read loop is woken
// by the engine's handshake hook, so the wait is event-driven.
func (d *daemon) probe(ctx context.Context, req localapi.ProbeRequest) (localapi.ProbeResult, *apiError) {
	timeout := probeDefault
	if req.TimeoutMs > 0 {
		timeout = min(time.Duration(req.TimeoutMs)*time.Millisecond, probeMax)
	}
	res := localapi.ProbeResult{CID: req.CID}
	d.mu.Lock()
	var key wgtypes.Key
	found := false
	for _, p := range d.applied.tunnel.Peers {
		if p.CID == req.CID {
			key, found = p.PublicKey, true
			res.Endpoint = p.Endpoint.String()
		}
	}
	d.mu.Unlock()
	if !found {
		return res, errf(http.StatusConflict, localapi.CodeInvalid, "runos vpn connect "+req.CID,
			"%s is not connected: there is no server to probe", req.CID)
	}
	// wireguard-go starts no handshake within RekeyTimeout (5 s) of the
	// last one it sent: after a handshake that recent, wait until one may
	// be sent (a timer to a known instant), so that the answer is to now.
	d.readDevice() // the device now, not at the last read (returns with mu held)
	var wait time.Duration
	if r, ok := d.in.Device.Peer(key); ok && !r.LastHandshake.IsZero() {
		wait = r.LastHandshake.Add(rekeyTimeout + 10*time.Millisecond).Sub(d.clock())
	}
	d.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, errf(http.StatusServiceUnavailable, "canceled", "", "probe %s: %v", req.CID, ctx.Err())
		case <-t.C:
		}
	}
	start := d.clock()
	wt, stop := d.watch()
	defer stop()
	if err := d.eng.Handshake(key); err != nil {
		res.Error = fmt.Sprintf("send a handshake initiation to %s: %v", res.Endpoint, err)
		return res, nil
	}
	d.kickRead()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		d.mu.Lock()
		if r, ok := d.in.Device.Peer(key); ok && !r.LastHandshake.Before(start) {
			res.OK, res.LastHandshake = true, r.LastHandshake
			res.Ms = float64(d.clock().Sub(start).Microseconds()) / 1000
			d.mu.Unlock()
			return res, nil
		}
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			res.Error = fmt.Sprintf("no handshake with the VPN server at %s within %s: UDP to it does not get through (or it does not know this device)",
				res.Endpoint, timeout)
			return res, nil
		case <-wt.ready:
			wt.take()
		case <-time.After(probeRead):
			d.kickRead() // a handshake changes no status when the peer was up already
		}
	}
}
