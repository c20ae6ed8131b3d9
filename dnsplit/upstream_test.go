package dnsplit

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// portServer answers every A query with its name's length and records the
// client port of each query.
func portServer(t *testing.T) (netip.AddrPort, func() map[int]int) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ports := map[int]int{}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		mu.Lock()
		ports[w.RemoteAddr().(*net.UDPAddr).Port]++
		mu.Unlock()
		r := new(dns.Msg)
		r.SetReply(req)
		r.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{req.Question[0].Name}}}
		_ = w.WriteMsg(r)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return netip.MustParseAddrPort(pc.LocalAddr().String()), func() map[int]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(ports)
	}
}

func packQuery(t *testing.T, name string, id uint16) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeTXT)
	m.Id = id
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncSend waits for one send's answer.
func syncSend(ex exchanger, q []byte, s netip.AddrPort, tcp bool, timeout time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	ex.send(q, s, tcp, timeout, func(b []byte, err error) { ch <- res{b, err} })
	r := <-ch
	return r.b, r.err
}

func TestUpstreamSocketsAreSharedAndRotated(t *testing.T) {
	srv, ports := portServer(t)
	ex := &netExchanger{}
	defer ex.close()

	// Many queries at once on few sockets: each gets its own answer back,
	// under its own ID.
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("q%d.example.test.", i)
			q := packQuery(t, name, uint16(i))
			b, err := syncSend(ex, q, srv, false, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			var r dns.Msg
			if err := r.Unpack(b); err != nil || r.Id != uint16(i) || r.Answer[0].(*dns.TXT).Txt[0] != name {
				errs <- fmt.Errorf("query %d got %v (%v)", i, &r, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(ports()); n > sockPerServer {
		t.Errorf("200 concurrent queries used %d source ports, want at most %d shared sockets", n, sockPerServer)
	}

	// Past sockMaxUses per socket, fresh sockets (fresh ports) take over.
	total := 2 * sockPerServer * sockMaxUses
	for i := range total {
		if _, err := syncSend(ex, packQuery(t, "r.example.test.", uint16(i)), srv, false, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(ports()); n < 2*sockPerServer || n > total/100 {
		t.Errorf("%d queries used %d source ports: want the ports to rotate, but sockets to be shared", total, n)
	}
}

func TestUpstreamTimeoutAndLateAnswers(t *testing.T) {
	dead, _ := blackhole(t)
	ex := &netExchanger{}
	defer ex.close()
	_, err := syncSend(ex, packQuery(t, "x.example.test.", 1), dead, false, 100*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a server that never answers: %v, want a timeout", err)
	}
	pl := ex.pool(dead)
	pl.mu.Lock()
	for _, s := range pl.socks {
		s.mu.Lock()
		if len(s.pending) != 0 {
			t.Errorf("a timed-out query is still pending")
		}
		s.mu.Unlock()
	}
	pl.mu.Unlock()
}

func TestAnswersChecksTheQuestion(t *testing.T) {
	q := packQuery(t, "App.Ky3.example.", 7)
	ql := questionLen(q)
	resp := func(name string, id uint16, mutate func(*dns.Msg)) []byte {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeTXT)
		m.Id = id
		m.Response = true
		if mutate != nil {
			mutate(m)
		}
		b, _ := m.Pack()
		return b
	}
	cases := map[string]struct {
		r    []byte
		want bool
	}{
		"same question, other case": {resp("app.KY3.example.", 7, nil), true},
		"other name":                {resp("app.ky4.example.", 7, nil), false},
		"other id":                  {resp("App.Ky3.example.", 8, nil), false},
		"other type":                {resp("App.Ky3.example.", 7, func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeA }), false},
		"not a response":            {resp("App.Ky3.example.", 7, func(m *dns.Msg) { m.Response = false }), false},
		"no question":               {resp("App.Ky3.example.", 7, func(m *dns.Msg) { m.Question = nil }), false},
		"runt":                      {q[:5], false},
	}
	for name, c := range cases {
		if got := answers(c.r, q, ql); got != c.want {
			t.Errorf("%s: answers = %v, want %v", name, got, c.want)
		}
	}
}

func TestUpstreamCloseFailsWhatIsPendingAndSweeperStops(t *testing.T) {
	dead, _ := blackhole(t)
	ex := &netExchanger{}
	got := make(chan error, 1)
	ex.send(packQuery(t, "x.example.test.", 1), dead, false, time.Hour, func(_ []byte, err error) { got <- err })
	ex.close()
	select {
	case err := <-got:
		if err == nil {
			t.Error("a query to a dead server succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("close left a query pending")
	}
	if _, err := syncSend(ex, packQuery(t, "y.example.test.", 2), dead, false, time.Second); err == nil {
		t.Error("a closed exchanger sent a query")
	}

	// The sweeper runs only while something is pending.
	ex = &netExchanger{}
	defer ex.close()
	if _, err := syncSend(ex, packQuery(t, "z.example.test.", 3), dead, false, 50*time.Millisecond); err == nil {
		t.Fatal("no timeout")
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ex.mu.Lock()
		running := ex.sweeping
		ex.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper kept running with nothing pending")
		}
	}
}
