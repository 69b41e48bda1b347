package dev

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/serving/certs"
)

// reviewProxy plays the module's Service: the API server calls it, it
// forwards to the admission role, and it reports each review as it passes.
// It serves the certificate the role keeps in its Secret, so the caBundle the
// role registers is the one the API server checks the proxy against.
type reviewProxy struct {
	cs                kubernetes.Interface
	namespace, secret string
	target            string // host:port of the admission role
	onReview          func(path string, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse)
	mu                sync.Mutex
	cert              *tls.Certificate
	upstream          *http.Client
	listener          net.Listener
	server            *http.Server
	maxBody           int64
}

func newReviewProxy(cs kubernetes.Interface, namespace, secret string) (*reviewProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the webhook proxy: %w", err)
	}
	return &reviewProxy{cs: cs, namespace: namespace, secret: secret, listener: l, maxBody: 8 << 20}, nil
}

// Addr is where the API server is told to call.
func (p *reviewProxy) Addr() string { return p.listener.Addr().String() }

func (p *reviewProxy) serve(target string, onReview func(string, *admissionv1.AdmissionRequest, *admissionv1.AdmissionResponse)) {
	p.target, p.onReview = target, onReview
	p.server = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: p.getCertificate},
	}
	go func() { _ = p.server.ServeTLS(p.listener, "", "") }()
}

func (p *reviewProxy) close() {
	if p.server == nil {
		_ = p.listener.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.server.Shutdown(ctx)
}

// load reads the role's certificate and CA from its Secret, once it exists.
func (p *reviewProxy) load() (*tls.Certificate, *http.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cert != nil {
		return p.cert, p.upstream, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := p.cs.CoreV1().Secrets(p.namespace).Get(ctx, p.secret, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("the admission role's certificate Secret %s/%s: %w", p.namespace, p.secret, err)
	}
	pair, err := tls.X509KeyPair(s.Data[certs.KeyCert], s.Data[certs.KeyKey])
	if err != nil {
		return nil, nil, fmt.Errorf("certificate Secret %s/%s: %w", p.namespace, p.secret, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.Data[certs.KeyCABundle])
	p.cert = &pair
	p.upstream = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: "127.0.0.1"}},
	}
	return p.cert, p.upstream, nil
}

func (p *reviewProxy) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, _, err := p.load()
	return c, err
}

func (p *reviewProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, upstream, err := p.load()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, p.maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, "https://"+p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := upstream.Do(out)
	if err != nil {
		http.Error(w, "the admission role does not answer: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, p.maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)

	if p.onReview == nil || strings.HasPrefix(r.URL.Path, "/canary/") {
		return
	}
	var in, back admissionv1.AdmissionReview
	if json.Unmarshal(body, &in) != nil || json.Unmarshal(answer, &back) != nil || in.Request == nil || back.Response == nil {
		return
	}
	p.onReview(r.URL.Path, in.Request, back.Response)
}

// review summarizes a request and its answer for the timeline.
func review(path string, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) *Review {
	r := &Review{
		Operation: string(req.Operation), Kind: req.Kind.Kind, Namespace: req.Namespace, Name: req.Name,
		Webhook: strings.SplitN(strings.Trim(path, "/"), "/", 2)[0], Allowed: resp.Allowed, Warnings: resp.Warnings,
	}
	if req.Kind.Group == "" && req.Kind.Kind == "Namespace" {
		// The API server gives a Namespace's request its own name as
		// namespace; it is cluster-scoped: acme, not acme/acme.
		r.Namespace = ""
	}
	if r.Name == "" {
		// A generated name is not known yet at admission.
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if json.Unmarshal(req.Object.Raw, &meta) == nil && meta.Metadata.GenerateName != "" {
			r.Name = meta.Metadata.GenerateName + "*"
		}
	}
	if resp.Result != nil {
		r.Message = resp.Result.Message
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if len(resp.Patch) > 0 && json.Unmarshal(resp.Patch, &ops) == nil {
		for _, o := range ops {
			s := o.Op + " " + strings.ReplaceAll(strings.ReplaceAll(o.Path, "~1", "/"), "~0", "~")
			if len(o.Value) > 0 {
				s += " = " + string(o.Value)
			}
			r.Patch = append(r.Patch, s)
		}
	}
	return r
}
