package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority that signs serving certificates.
type CA struct {
	// CertPEM is the authority's certificate: the caBundle of a webhook.
	CertPEM []byte

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA creates a self-signed authority valid for the given duration.
func NewCA(commonName string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate(validFor)),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{CertPEM: encode("CERTIFICATE", der), cert: cert, key: key}, nil
}

// Serving is a serving certificate and its key, in PEM.
type Serving struct {
	CertPEM []byte
	KeyPEM  []byte
}

// TLSCertificate returns the pair in the form crypto/tls serves.
func (s *Serving) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(s.CertPEM, s.KeyPEM)
}

// Issue signs a serving certificate for the given hosts: each is a DNS name or
// an IP address. The first is the subject's common name.
func (ca *CA) Issue(hosts []string, validFor time.Duration) (*Serving, error) {
	if len(hosts) == 0 {
		return nil, errors.New("issue serving certificate: expected at least one DNS name or IP address, got none")
	}
	tmpl := ca.template(pkix.Name{CommonName: hosts[0]}, validFor, x509.ExtKeyUsageServerAuth)
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.sign(tmpl, fmt.Sprintf("serving certificate for %v", hosts))
}

// IssueClient signs a client certificate for the user commonName in the
// groups orgs, as the API server reads an X.509 client's identity.
func (ca *CA) IssueClient(commonName string, orgs []string, validFor time.Duration) (*Serving, error) {
	tmpl := ca.template(pkix.Name{CommonName: commonName, Organization: orgs}, validFor, x509.ExtKeyUsageClientAuth)
	return ca.sign(tmpl, "client certificate for "+commonName)
}

func (ca *CA) template(subject pkix.Name, validFor time.Duration, usage x509.ExtKeyUsage) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    now.Add(-backdate(validFor)),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
}

// sign signs tmpl with a new key, what naming the certificate in errors.
func (ca *CA) sign(tmpl *x509.Certificate, what string) (*Serving, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the key of the %s: %w", what, err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", what, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Serving{CertPEM: encode("CERTIFICATE", der), KeyPEM: encode("EC PRIVATE KEY", keyDER)}, nil
}

// Pool returns a certificate pool that trusts only this authority.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// backdate starts a certificate's validity a little in the past, to tolerate
// clock skew between the issuer and its clients.
func backdate(validFor time.Duration) time.Duration { return min(time.Minute, validFor/10) }

func encode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(err)
	}
	return n
}
