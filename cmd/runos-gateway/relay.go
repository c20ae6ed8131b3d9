package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/gateway/relay"
	"github.com/runos/vpn/internal/connlimit"
)

// serveRelay listens on --relay-listen with TLS and serves the relay until
// the returned stop is called. A port that cannot be bound is an error at
// start, not a silent absence.
func serveRelay(ctx context.Context, f flags, bind *relay.Bind, client *api.Client, log *slog.Logger) (stop func(), err error) {
	var cert *tls.Certificate
	if f.relayCert != "" {
		c, err := tls.LoadX509KeyPair(f.relayCert, f.relayKey)
		if err != nil {
			return nil, fmt.Errorf("--relay-cert/--relay-key: %w", err)
		}
		cert = &c
	}
	if f.relayRecord != "" {
		if err := os.MkdirAll(f.relayRecord, 0o700); err != nil {
			return nil, fmt.Errorf("--relay-record: %w", err)
		}
	}
	ln, err := net.Listen("tcp", f.relayListen)
	if err != nil {
		return nil, fmt.Errorf("--relay-listen %s: %w", f.relayListen, err)
	}
	// Connections per address are capped before TLS (the streams per
	// device address again in the handler, which sees the address behind
	// the node's ingress too): one host cannot pin the relay with
	// connections it never finishes. The ingress on loopback is exempt.
	ln = connlimit.Listen(ln, connlimit.Config{PerAddr: 2 * relay.DefaultMaxPerAddr, Log: log, What: "relay",
		Exempt: func(a netip.Addr) bool { return cert == nil && a.IsLoopback() }})
	h := &relay.Server{Bind: bind, Log: log, Serving: bind.Serving, RecordDir: f.relayRecord, BehindProxy: cert == nil,
		Check: func(ctx context.Context, ticket string, key wgtypes.Key) (string, error) {
			ok, err := client.RelayCheck(ctx, api.RelayCheckRequest{Ticket: ticket, PublicKey: key.String()})
			var ae *api.Error
			if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
				// Control refused this gateway's own token: not the device's fault.
				return "", fmt.Errorf("control refused the node's enrollment token: %w", err)
			}
			if err != nil {
				return "", err
			}
			return ok.DeviceID, nil
		}}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	go func() {
		serve := srv.Serve
		if cert != nil {
			serve = func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }
		}
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("relay stopped serving", "err", err)
		}
	}()
	log.Info("relay listening", "address", ln.Addr().String(), "tls", cert != nil)
	return func() {
		bind.CloseStreams("the gateway is stopping")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}, nil
}
