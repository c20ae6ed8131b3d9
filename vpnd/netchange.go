package vpnd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"

	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/platform/netmon"
	"github.com/runos/vpn/vpnd/state"
	"github.com/runos/vpn/vpnd/wake"
)

// watchNetworkAndSleep follows the network monitor (when there is one) and
// the sleep detector until ctx ends; the returned function waits for both
// to stop (before the teardown, so neither touches a closed tunnel).
func (d *daemon) watchNetworkAndSleep(ctx context.Context, cfg Config, tunnelName string) (wait func()) {
	var wg sync.WaitGroup
	if cfg.NetMon != nil {
		mon, err := cfg.NetMon(func(iface string) bool { return iface == tunnelName }, d.log)
		if err != nil {
			d.log.Warn("network changes will go unnoticed (no monitor)", "err", err)
		} else {
			st := mon.State()
			d.change(func(in *state.Inputs) { in.Network = st })
			d.eng.SetUplinkMTU(st.MTU())
			d.log.Info("network", "uplink", st.String())
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer mon.Close()
				for {
					select {
					case <-ctx.Done():
						return
					case c := <-mon.Changes():
						d.networkChanged(c.New)
					}
				}
			}()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		wake.Watch(ctx, d.woke)
	}()
	return wg.Wait
}

// networkChanged is the answer to a new uplink (an address or the default
// route changed): the state records it, TCP is clamped to the new uplink,
// and the tunnel and DNS look again.
func (d *daemon) networkChanged(st netmon.State) {
	d.change(func(in *state.Inputs) {
		in.Network = st
		in.NetworkChangedAt = d.clock()
	})
	d.eng.SetUplinkMTU(st.MTU())
	d.reconnect("the network changed")
}

// woke is the answer to a sleep: the state records it (a session that
// lapsed meanwhile ends here, the plan with it: peers, routes and DNS go),
// and every connected cluster re-handshakes at once.
func (d *daemon) woke(s wake.Sleep) {
	d.log.Info("woke: the daemon did not run for a while (the computer slept, or the process was stopped)",
		"from", s.From.Format("15:04:05"), "for", s.Duration().Round(1e9).String())
	d.change(func(in *state.Inputs) { in.Slept = s })
	d.reconnect("woke from sleep")
}

// reconnect rebinds the tunnel's sockets, re-handshakes every peer,
// re-opens the relay decisions and has DNS look at what the network did to
// the resolver. It runs outside the daemon's lock.
func (d *daemon) reconnect(why string) {
	if d.relay != nil {
		d.relay.networkChanged() // before the engine redials its relays
	}
	if err := d.eng.NetworkChanged(); err != nil {
		d.log.Warn("rebind the tunnel after a change", "why", why, "err", err)
	}
	if r, ok := d.dns.(dnsplit.Rechecker); ok {
		r.Recheck()
	}
	d.kickRead()
	d.log.Info("re-handshaking every cluster", "why", why)
}

// relayTLS trusts what control's client trusts (the CA file) and the
// system's roots: a node's ingress may carry a public certificate.
func relayTLS(caFile string) (*tls.Config, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", caFile)
		}
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}
