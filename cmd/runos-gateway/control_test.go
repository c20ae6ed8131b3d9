//go:build linux

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// testControl serves GatewayMap and GatewayReport with the real api types
// and the long-poll's semantics, for several nodes, each with its own
// enrollment token. The real control is tested end to end in e2e/.
type testControl struct {
	mu      sync.Mutex
	version uint64
	nodes   map[string]*testNode // by node id
	tokens  map[string]string    // token → node id
	changed chan struct{}        // closed and replaced on every change
}

type testNode struct {
	m       api.GatewayMap
	reports []receivedReport
}

type receivedReport struct {
	api.GatewayReport
	at time.Time // when control received it
}

func newTestControl() *testControl {
	return &testControl{nodes: map[string]*testNode{}, tokens: map[string]string{}, changed: make(chan struct{})}
}

func (c *testControl) addNode(nid, token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	c.nodes[nid] = &testNode{m: api.GatewayMap{Version: c.version, NodeID: nid, CID: "ky3"}}
	c.tokens[token] = nid
}

// set changes the maps of several nodes in one commit, as control does in
// a move's switch, and returns the new version.
func (c *testControl) set(serves map[string]*api.GatewayService) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	for nid, s := range serves {
		n := c.nodes[nid]
		n.m.Version = c.version
		n.m.Serve = s
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return c.version
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: code, Message: msg}})
}

func (c *testControl) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	nid, ok := c.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	c.mu.Unlock()
	if !ok {
		writeErr(w, http.StatusUnauthorized, api.CodeUnauthorized, "unknown enrollment token")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/gateway/map":
		since, _ := strconv.ParseUint(r.URL.Query().Get(api.ParamSince), 10, 64)
		wait := 60 * time.Second
		if s, err := strconv.Atoi(r.URL.Query().Get(api.ParamWait)); err == nil {
			wait = time.Duration(s) * time.Second
		}
		timeout := time.After(wait)
		c.mu.Lock()
		for c.nodes[nid].m.Version == since {
			ch := c.changed
			c.mu.Unlock()
			select {
			case <-ch:
			case <-timeout:
				c.mu.Lock()
				since = ^uint64(0) // answer the current map unchanged
				continue
			case <-r.Context().Done():
				return
			}
			c.mu.Lock()
		}
		m := c.nodes[nid].m
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/gateway/report":
		var rep api.GatewayReport
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			writeErr(w, http.StatusBadRequest, api.CodeInvalid, err.Error())
			return
		}
		c.mu.Lock()
		c.nodes[nid].reports = append(c.nodes[nid].reports, receivedReport{rep, time.Now()})
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		writeErr(w, http.StatusNotFound, api.CodeNotFound, r.Method+" "+r.URL.Path)
	}
}

// waitReport returns the first report from nid that satisfies ok.
func (c *testControl) waitReport(t *testing.T, nid, what string, ok func(api.GatewayReport) bool) receivedReport {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		for _, r := range c.nodes[nid].reports {
			if ok(r.GatewayReport) {
				c.mu.Unlock()
				return r
			}
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			c.mu.Lock()
			n := len(c.nodes[nid].reports)
			var last any
			if n > 0 {
				last = c.nodes[nid].reports[n-1].GatewayReport
			}
			c.mu.Unlock()
			t.Fatalf("%s: no report %s (of %d; last %+v)", nid, what, n, last)
		}
	}
}

// serveTLS serves c on each listener with a certificate for their IPs,
// signed by a fresh CA, and returns the CA's PEM file.
func (c *testControl) serveTLS(t *testing.T, lns ...net.Listener) string {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "runos test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "control"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, ln := range lns {
		leafTmpl.IPAddresses = append(leafTmpl.IPAddresses, ln.Addr().(*net.TCPAddr).IP)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
	srv := &http.Server{Handler: c, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	for _, ln := range lns {
		go func() { _ = srv.ServeTLS(ln, "", "") }()
	}
	t.Cleanup(func() { srv.Close() })
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return caFile
}
