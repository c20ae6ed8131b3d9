//go:build !windows

package lab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"time"
)

// PKI is the lab's own certificate authority and control's certificate.
type PKI struct {
	CAPEM   []byte
	CertPEM []byte // control's certificate, signed by the CA
	KeyPEM  []byte // control's private key
}

// NewPKI makes a CA and a server certificate for control with an IP SAN
// for its address (clients verify it: nothing in the lab skips TLS
// verification). Certificates are valid from an hour before now (clock
// skew between namespaces is nil, but a paused VM is not) for 30 days.
//
// With several replicas, each one's own address is in the certificate too:
// HAProxy re-terminates TLS and checks each replica's with the lab's CA.
func NewPKI(controlIP netip.Addr, now time.Time, replicaIPs ...netip.Addr) (*PKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
		return n
	}
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "RunOS lab CA", Organization: []string{"RunOS lab"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("lab CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "runos-control (lab)"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips(controlIP, replicaIPs),
		DNSNames:     []string{"control.lab.runos"},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("control certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &PKI{
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// tlsPair parses the control certificate and key as a TLS pair (a check
// that they belong together).
func tlsPair(p *PKI) (tls.Certificate, error) { return tls.X509KeyPair(p.CertPEM, p.KeyPEM) }

func ips(first netip.Addr, more []netip.Addr) []net.IP {
	out := []net.IP{first.AsSlice()}
	for _, a := range more {
		if a != first {
			out = append(out, a.AsSlice())
		}
	}
	return out
}
