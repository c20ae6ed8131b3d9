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
	"time"
)

// WebAppBody is what the web app on a node answers (it stands in for
// Traefik on ports 80 of every node): tests look for it to tell which node
// served a request.
func WebAppBody(cid, nid string) string { return fmt.Sprintf("cluster=%s node=%s", cid, nid) }

// WebApp is the handler of the lab's web app on node nid of cluster cid.
func WebApp(cid, nid string) http.Handler {
	body := WebAppBody(cid, nid)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, "%s\nhello from the RunOS lab: you reached %s of cluster %s (%s %s from %s)\n",
			body, nid, cid, r.Method, r.URL.Path, r.RemoteAddr)
	})
}

// WebAppTLSListener listens on addr for HTTPS with a self-signed
// certificate made now for the cluster's names, as a node's ingress answers
// 443 (what runos vpn doctor checks through the tunnel). domain is the
// cluster's (<cid>.<aid>.<root>).
func WebAppTLSListener(addr, cid, domain string) (net.Listener, error) {
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
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	return tls.Listen("tcp", addr, cfg)
}
