package certs_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

func serial(t *testing.T, m *certs.SecretManager) string {
	t.Helper()
	c, err := m.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.String()
}

// verify checks a manager's serving certificate against a CA bundle for host.
func verify(t *testing.T, m *certs.SecretManager, bundle []byte, host string) error {
	t.Helper()
	c, err := m.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(c.Certificate[0])
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
	return err
}

func countCerts(bundle []byte) int {
	n := 0
	for rest := bundle; ; n++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return n
		}
	}
}

// Replicas starting at once agree on one certificate: creation is
// create-if-absent, not last-writer-wins.
func TestReplicasShareOneCertificate(t *testing.T) {
	ns := env.Namespace(t)
	hosts := []string{"guard.guard-system.svc", "guard.guard-system.svc.cluster.local", "127.0.0.1"}
	var wg sync.WaitGroup
	managers := make([]*certs.SecretManager, 4)
	errs := make([]error, 4)
	for i := range managers {
		managers[i] = certs.NewSecretManager(env.Clientset, certs.SecretOptions{Namespace: ns, Name: "guard-tls", Hosts: hosts, Log: logr.Discard()})
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = managers[i].Ensure(t.Context()) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	first := serial(t, managers[0])
	for i, m := range managers[1:] {
		if s := serial(t, m); s != first {
			t.Fatalf("replica %d serves certificate %s, replica 0 %s", i+1, s, first)
		}
	}
	for _, h := range hosts {
		if err := verify(t, managers[0], managers[0].CABundle(), h); err != nil {
			t.Errorf("certificate for %s: %v", h, err)
		}
	}
	// A replica started later loads the same, without renewing.
	late := certs.NewSecretManager(env.Clientset, certs.SecretOptions{Namespace: ns, Name: "guard-tls", Hosts: hosts, Log: logr.Discard()})
	if err := late.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if serial(t, late) != first {
		t.Fatal("a later replica renewed a certificate that was not due")
	}
}

// Certificates are renewed when a third of their life is left; a new CA comes
// in beside the old, and a client holding the bundle trusts both the old and
// the new serving certificate during the overlap.
func TestRotationKeepsOldAndNewTrusted(t *testing.T) {
	ns := env.Namespace(t)
	opts := certs.SecretOptions{Namespace: ns, Name: "short-tls", Hosts: []string{"127.0.0.1"},
		CAValidity: 6 * time.Second, ServingValidity: 3 * time.Second, Log: logr.Discard()}
	a := certs.NewSecretManager(env.Clientset, opts)
	b := certs.NewSecretManager(env.Clientset, opts)
	if err := a.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	first := serial(t, a)
	firstCert, _ := a.GetCertificate(nil)

	// Serving certificate due (after 2 of its 3 seconds), CA not yet.
	time.Sleep(2200 * time.Millisecond) // the scenario: the certificates age
	if err := b.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if serial(t, b) == first {
		t.Fatal("the serving certificate was not renewed when due")
	}
	if n := countCerts(b.CABundle()); n != 1 {
		t.Fatalf("bundle holds %d CAs after a serving renewal, want 1", n)
	}
	// Replica a picks up b's renewal instead of renewing again.
	if err := a.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if serial(t, a) != serial(t, b) {
		t.Fatal("replicas serve different certificates after a renewal")
	}

	// CA due (after 4 of its 6 seconds): a new CA beside the old.
	time.Sleep(2200 * time.Millisecond) // the scenario: the certificates age
	if err := a.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	bundle := a.CABundle()
	if n := countCerts(bundle); n != 2 {
		t.Fatalf("bundle holds %d CAs after a CA renewal, want the new and the old", n)
	}
	if err := verify(t, a, bundle, "127.0.0.1"); err != nil {
		t.Fatalf("new serving certificate against the bundle: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	oldLeaf, _ := x509.ParseCertificate(firstCert.Certificate[0])
	if _, err := oldLeaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: oldLeaf.NotBefore.Add(time.Second)}); err != nil {
		t.Fatalf("a certificate of the old CA against the bundle: %v", err)
	}
}

// Without the right to the Secret, the error names the rule to add.
func TestForbiddenSecretNamesTheRule(t *testing.T) {
	ns := env.Namespace(t)
	cs, err := kubernetes.NewForConfig(env.AsServiceAccountConfig(ns, "guard"))
	if err != nil {
		t.Fatal(err)
	}
	m := certs.NewSecretManager(cs, certs.SecretOptions{Namespace: ns, Name: "guard-tls", Hosts: []string{"127.0.0.1"}, Log: logr.Discard()})
	err = m.Ensure(t.Context())
	if err == nil || !strings.Contains(err.Error(), "resources: [secrets], verbs: [get, create, update], resourceNames: [guard-tls]") {
		t.Fatalf("err = %v, want the rule to add", err)
	}
}
