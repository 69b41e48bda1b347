package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Keys of the certificate Secret.
const (
	KeyCABundle = "ca.crt" // every CA a client should trust, newest first
	KeyCAKey    = "ca.key" // the newest CA's key
	KeyCert     = corev1.TLSCertKey
	KeyKey      = corev1.TLSPrivateKeyKey
)

// SecretOptions configure a SecretManager.
type SecretOptions struct {
	Namespace, Name string
	// Hosts the serving certificate is for: DNS names and IP addresses.
	Hosts []string
	// CAValidity and ServingValidity: one year and ninety days when zero.
	CAValidity, ServingValidity time.Duration
	// Each is renewed when less than a third of its validity is left.
	Now func() time.Time
	Log logr.Logger
}

// SecretManager keeps a module's CA and serving certificate in a Secret that
// all its replicas share: the first creates it (the others find it, there is
// no race: creation is create-if-absent), any of them renews what is due
// (updates are compare-and-swap), and each serves what the Secret holds.
//
// A new CA is introduced beside the old one: the bundle holds both until the
// old one expires, so a client given the bundle trusts the serving
// certificates of either while replicas and webhook configurations catch up.
type SecretManager struct {
	c    kubernetes.Interface
	opts SecretOptions

	mu     sync.RWMutex
	cert   *tls.Certificate
	bundle []byte
	rv     string
}

// NewSecretManager returns a manager for the Secret opts names.
func NewSecretManager(c kubernetes.Interface, opts SecretOptions) *SecretManager {
	if opts.CAValidity == 0 {
		opts.CAValidity = 365 * 24 * time.Hour
	}
	if opts.ServingValidity == 0 {
		opts.ServingValidity = 90 * 24 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &SecretManager{c: c, opts: opts}
}

// GetCertificate serves the current certificate; for tls.Config.
func (m *SecretManager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.cert == nil {
		return nil, errors.New("no serving certificate loaded yet")
	}
	return m.cert, nil
}

// CABundle is what clients of the server should trust (a webhook's caBundle).
func (m *SecretManager) CABundle() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.bundle
}

// Ensure makes the Secret hold a valid CA and serving certificate — creating
// it, or renewing what is due — and loads them.
func (m *SecretManager) Ensure(ctx context.Context) error {
	secrets := m.c.CoreV1().Secrets(m.opts.Namespace)
	for attempt := 0; ; attempt++ {
		s, err := secrets.Get(ctx, m.opts.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			s, err = m.fresh()
			if err != nil {
				return err
			}
			created, err := secrets.Create(ctx, s, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue // another replica made it first: use theirs
			}
			if err != nil {
				return m.explain("create", err)
			}
			m.opts.Log.Info("created the serving certificate Secret", "secret", m.opts.Namespace+"/"+m.opts.Name)
			return m.load(created)
		case err != nil:
			return m.explain("get", err)
		}
		next, changed, err := m.renew(s)
		if err != nil {
			return err
		}
		if !changed {
			return m.load(s)
		}
		updated, err := secrets.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue // another replica renewed it: look again
		}
		if err != nil {
			return m.explain("update", err)
		}
		m.opts.Log.Info("renewed the serving certificate", "secret", m.opts.Namespace+"/"+m.opts.Name)
		return m.load(updated)
	}
}

// Run renews and reloads every interval until ctx ends, so that a replica
// serves what another one renewed.
func (m *SecretManager) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.Ensure(ctx); err != nil {
				m.opts.Log.Error(err, "renew the serving certificate")
			}
		}
	}
}

func (m *SecretManager) explain(verb string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s the certificate Secret %s/%s: %w: grant the module a Role rule {apiGroups: [\"\"], resources: [secrets], verbs: [get, create, update], resourceNames: [%s]} (create cannot be narrowed by name), or mount a certificate with --cert-dir", verb, m.opts.Namespace, m.opts.Name, err, m.opts.Name)
	}
	return fmt.Errorf("%s the certificate Secret %s/%s: %w", verb, m.opts.Namespace, m.opts.Name, err)
}

// fresh is a new Secret with a new CA and serving certificate.
func (m *SecretManager) fresh() (*corev1.Secret, error) {
	ca, err := NewCA(m.opts.Name+"-ca", m.opts.CAValidity)
	if err != nil {
		return nil, err
	}
	return m.withServing(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.opts.Namespace, Name: m.opts.Name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{KeyCABundle: ca.CertPEM, KeyCAKey: ca.KeyPEM()},
	}, ca)
}

func (m *SecretManager) withServing(s *corev1.Secret, ca *CA) (*corev1.Secret, error) {
	serving, err := ca.Issue(m.opts.Hosts, m.opts.ServingValidity)
	if err != nil {
		return nil, err
	}
	s.Data[KeyCert], s.Data[KeyKey] = serving.CertPEM, serving.KeyPEM
	return s, nil
}

// renew returns the Secret with what is due renewed: a CA with less than a
// third of its life left is succeeded by a new one (the old stays in the
// bundle until it expires), and a serving certificate that is near its end,
// not issued by the newest CA, or not for the hosts asked is issued anew.
func (m *SecretManager) renew(s *corev1.Secret) (*corev1.Secret, bool, error) {
	now := m.opts.Now()
	ca, err := ParseCA(s.Data[KeyCABundle], s.Data[KeyCAKey])
	if err != nil {
		return nil, false, fmt.Errorf("certificate Secret %s/%s: %w: delete it and a new one is made", m.opts.Namespace, m.opts.Name, err)
	}
	next := s.DeepCopy()
	changed := false
	if due(ca.cert.NotBefore, ca.cert.NotAfter, now) {
		newCA, err := NewCA(m.opts.Name+"-ca", m.opts.CAValidity)
		if err != nil {
			return nil, false, err
		}
		next.Data[KeyCABundle] = append(append([]byte{}, newCA.CertPEM...), s.Data[KeyCABundle]...)
		next.Data[KeyCAKey] = newCA.KeyPEM()
		ca, changed = newCA, true
	}
	// Drop CAs that have expired from the bundle.
	if pruned := pruneBundle(next.Data[KeyCABundle], now); len(pruned) != len(next.Data[KeyCABundle]) {
		next.Data[KeyCABundle], changed = pruned, true
	}
	leaf, err := parseLeaf(s.Data[KeyCert])
	if err != nil || due(leaf.NotBefore, leaf.NotAfter, now) || leaf.CheckSignatureFrom(ca.cert) != nil || !covers(leaf, m.opts.Hosts) {
		if _, err := m.withServing(next, ca); err != nil {
			return nil, false, err
		}
		changed = true
	}
	return next, changed, nil
}

// due reports whether less than a third of a certificate's life is left.
func due(notBefore, notAfter, now time.Time) bool {
	return now.After(notAfter.Add(-notAfter.Sub(notBefore) / 3))
}

func covers(leaf *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func (m *SecretManager) load(s *corev1.Secret) error {
	pair, err := tls.X509KeyPair(s.Data[KeyCert], s.Data[KeyKey])
	if err != nil {
		return fmt.Errorf("certificate Secret %s/%s: %w", m.opts.Namespace, m.opts.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cert, m.bundle, m.rv = &pair, s.Data[KeyCABundle], s.ResourceVersion
	return nil
}

// KeyPEM is the CA's private key in PEM.
func (ca *CA) KeyPEM() []byte {
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return encode("EC PRIVATE KEY", der)
}

// ParseCA reads a CA back from its certificate (the first of a bundle) and key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("expected a PEM CA certificate, found none")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("expected a PEM CA key, found none")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CA key: %w", err)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("the CA key does not match the newest CA certificate")
	}
	return &CA{CertPEM: encode("CERTIFICATE", cert.Raw), cert: cert, key: key}, nil
}

func parseLeaf(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, errors.New("no serving certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// pruneBundle drops expired certificates from a PEM bundle.
func pruneBundle(bundle []byte, now time.Time) []byte {
	var out []byte
	rest := bundle
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && now.After(c.NotAfter) {
			continue
		}
		out = append(out, pem.EncodeToMemory(block)...)
	}
}
