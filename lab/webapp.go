//go:build !windows

package lab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// WebAppBody is what the web app on a node answers (it stands in for
// Traefik on ports 80 of every node): tests look for it to tell which node
// served a request.
func WebAppBody(cid, nid string) string { return fmt.Sprintf("cluster=%s node=%s", cid, nid) }

// WebApp is the handler of the lab's web app on node nid of cluster cid.
// /bytes/N answers N bytes (at most 64 MiB) for downloads of a known size.
func WebApp(cid, nid string) http.Handler {
	body := WebAppBody(cid, nid)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := strings.CutPrefix(r.URL.Path, "/bytes/"); ok {
			size, err := strconv.Atoi(n)
			if err != nil || size < 0 || size > 64<<20 {
				http.Error(w, "want /bytes/N, N up to 64 MiB", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", strconv.Itoa(size))
			chunk := []byte(strings.Repeat("runos-lab bytes ", 4096))
			for size > 0 {
				k := min(size, len(chunk))
				if _, err := w.Write(chunk[:k]); err != nil {
					return
				}
				size -= k
			}
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, "%s\nhello from the RunOS lab: you reached %s of cluster %s (%s %s from %s)\n",
			body, nid, cid, r.Method, r.URL.Path, r.RemoteAddr)
	})
}

// WebAppTLSListener listens on addr for HTTPS with a self-signed
// certificate made now for the cluster's names, as a node's ingress answers
// 443 (what runos vpn doctor checks through the tunnel). domain is the
// cluster's (<cid>.<aid>.<root>). A client that names no server (it
// dialled an address, as a device dials its node's relay) gets relayCert
// instead when there is one: the lab CA's certificate for the node's
// addresses.
func WebAppTLSListener(addr, cid, domain string, relayCert *tls.Certificate) (net.Listener, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cid + " (lab web app)"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		DNSNames: []string{"*." + domain, domain}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	own := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if relayCert != nil && hello.ServerName == "" {
				return relayCert, nil
			}
			return own, nil
		}}
	return tls.Listen("tcp", addr, cfg)
}

// WithRelay is the web app in front of a node's relay, as Traefik routes
// it in production: the relay's path goes to the gateway at upstream
// (plain HTTP on the node's loopback; the WebSocket upgrade passes through,
// with X-Forwarded-For naming the device), everything else to app.
func WithRelay(app http.Handler, upstream, path string) http.Handler {
	if upstream == "" {
		return app
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: upstream})
	proxy.FlushInterval = -1 // a stream: every write goes on at once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			proxy.ServeHTTP(w, r)
			return
		}
		app.ServeHTTP(w, r)
	})
}
