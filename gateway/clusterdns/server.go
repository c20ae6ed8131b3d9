package clusterdns

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Port is the DNS port the cluster DNS listens on.
const Port = 53

// Server runs the cluster DNS on one address, over UDP and TCP. Set moves it
// to another address only when the address changes; new domains just swap
// the handler's zone.
type Server struct {
	port int // 53; tests use 0 for a free port
	log  *slog.Logger

	handler Handler

	mu      sync.Mutex
	addr    netip.AddrPort // bound; zero when not listening
	servers []*dns.Server
	done    []chan error
}

// NewServer returns a stopped server that will listen on port (Port in
// production; 0 picks a free port, for tests).
func NewServer(port int, log *slog.Logger) *Server {
	return &Server{port: port, log: log}
}

// Handler returns the server's handler (for tests and benchmarks).
func (s *Server) Handler() *Handler { return &s.handler }

// Addr is the address the server listens on (zero when stopped).
func (s *Server) Addr() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Set answers z, listening on its address. The first call starts the
// listeners; later calls only rebind when the address changes.
func (s *Server) Set(z *Zone) error {
	if z == nil {
		return fmt.Errorf("cluster dns: no zone")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Swap the zone first: on a rebind the new listeners answer the new
	// zone from their first packet.
	s.handler.SetZone(z)
	if s.addr.IsValid() && s.addr.Addr() == z.Address() {
		return nil
	}
	s.stopLocked()
	if err := s.startLocked(z.Address()); err != nil {
		return err
	}
	s.log.Info("cluster dns listening", "addr", s.addr.String(), "domains", z.Domains())
	return nil
}

// Close stops the listeners.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.addr
	s.stopLocked()
	s.handler.SetZone(nil)
	if was.IsValid() {
		s.log.Info("cluster dns stopped", "addr", was.String())
	}
	return nil
}

func (s *Server) startLocked(ip netip.Addr) error {
	pc, ln, err := listenBoth(ip, s.port)
	if err != nil {
		return fmt.Errorf("cluster dns: listen on %s port %d: %w", ip, s.port, err)
	}
	bound := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	s.addr = netip.AddrPortFrom(ip, bound.Port())
	for _, srv := range []*dns.Server{
		{PacketConn: pc, Handler: &s.handler},
		{Listener: ln, Handler: &s.handler, ReadTimeout: 5 * time.Second, IdleTimeout: func() time.Duration { return 10 * time.Second }},
	} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		done := make(chan error, 1)
		go func() { done <- srv.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-done:
			s.stopLocked()
			return fmt.Errorf("cluster dns: serve on %s: %w", s.addr, err)
		}
		s.servers = append(s.servers, srv)
		s.done = append(s.done, done)
	}
	return nil
}

func (s *Server) stopLocked() {
	for i, srv := range s.servers {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.ShutdownContext(ctx)
		cancel()
		<-s.done[i]
	}
	s.servers, s.done, s.addr = nil, nil, netip.AddrPort{}
}

// listenBoth binds UDP and TCP on the same ip and port. With port 0 (tests)
// it picks the port on TCP first, where a free port is likelier to be taken
// for the other protocol (every outgoing connection holds one), and retries
// while the UDP side of the pick is taken.
func listenBoth(ip netip.Addr, port int) (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range 32 {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
		if err != nil {
			return nil, nil, err
		}
		p := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip.String(), strconv.Itoa(p)))
		if err == nil {
			return pc, ln, nil
		}
		ln.Close()
		lastErr = err
		if port != 0 {
			break
		}
	}
	return nil, nil, lastErr
}
