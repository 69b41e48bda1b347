package vigiltest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/serving/certs"
)

// ServingCert is a serving certificate a test issues from a CA of its own:
// for a module's admission role started with --cert-dir, or for a server of
// the test's own that the API server calls.
type ServingCert struct {
	// Dir holds tls.crt, tls.key and ca.crt, as `<module> admission
	// --cert-dir` reads them.
	Dir string
	// CertPEM and KeyPEM are the serving certificate and its key.
	CertPEM, KeyPEM []byte
	// CABundle is the CA's PEM certificate: a webhook's caBundle.
	CABundle []byte
	// Certificate is the pair for a tls.Config.
	Certificate tls.Certificate
	// Pool holds the CA, for clients that trust the server.
	Pool *x509.CertPool
}

// NewServingCert issues a certificate for hosts (DNS names or IPs), valid for
// a day, and writes it into a folder of the test's. It fails the test on error.
func NewServingCert(t testing.TB, hosts ...string) *ServingCert {
	t.Helper()
	ca, err := certs.NewCA("vigiltest-ca", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(hosts, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := serving.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	c := &ServingCert{Dir: t.TempDir(), CertPEM: serving.CertPEM, KeyPEM: serving.KeyPEM, CABundle: ca.CertPEM, Certificate: pair, Pool: ca.Pool()}
	for name, data := range map[string][]byte{"tls.crt": c.CertPEM, "tls.key": c.KeyPEM, "ca.crt": c.CABundle} {
		if err := os.WriteFile(filepath.Join(c.Dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}
