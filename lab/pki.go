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
	"net/netip"
	"time"
)

// PKI is the lab's own certificate authority and control's certificate.
type PKI struct {
	CAPEM   []byte
	CertPEM []byte // control's certificate, signed by the CA
	KeyPEM  []byte // control's private key

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	now   time.Time
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
	p := &PKI{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), caKey: caKey, now: now}
	if p.ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, err
	}
	addrs := []netip.Addr{controlIP}
	for _, a := range replicaIPs {
		if a != controlIP {
			addrs = append(addrs, a)
		}
	}
	p.CertPEM, p.KeyPEM, err = p.Leaf("runos-control (lab)", []string{"control.lab.runos"}, addrs)
	if err != nil {
		return nil, fmt.Errorf("control certificate: %w", err)
	}
	return p, nil
}

// Leaf issues a server certificate from the lab's CA for the given names
// and addresses (a node's relay on 443 gets one for its addresses).
func (p *PKI) Leaf(cn string, names []string, ips []netip.Addr) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    p.now.Add(-time.Hour),
		NotAfter:     p.now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
	}
	for _, ip := range ips {
		leaf.IPAddresses = append(leaf.IPAddresses, ip.AsSlice())
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// tlsPair parses the control certificate and key as a TLS pair (a check
// that they belong together).
func tlsPair(p *PKI) (tls.Certificate, error) { return tls.X509KeyPair(p.CertPEM, p.KeyPEM) }
