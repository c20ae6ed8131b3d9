// Package testcert makes the certificate a test serves HTTPS with on
// loopback: self-signed for 127.0.0.1, ECDSA P-256 (cheap handshakes, as a
// production certificate's would be), valid from an hour ago for a day,
// and a client that trusts it and nothing else.
//
// It is for tests and benchmarks only; the lab makes its own CA
// (lab/pki.go), as a deployment would have one.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// Cert is a certificate and its key, PEM-encoded.
type Cert struct {
	CertPEM, KeyPEM []byte
}

// New makes a certificate for 127.0.0.1.
func New(tb testing.TB) Cert {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "runos-control test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	}
}

// TLS is the certificate for a server's tls.Config.
func (c Cert) TLS(tb testing.TB) tls.Certificate {
	tb.Helper()
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	return cert
}

// Write writes the certificate and the key to the files named (0600).
func (c Cert) Write(tb testing.TB, certFile, keyFile string) {
	tb.Helper()
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// Client is an HTTPS client that trusts this certificate alone.
func (c Cert) Client() *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.CertPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
}
