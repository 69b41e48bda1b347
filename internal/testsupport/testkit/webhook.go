package testkit

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/vigilkit/vigil/internal/serving/certs"
)

// WebhookServer is an HTTPS server on loopback that the API server can call as
// a webhook: its certificate is issued for 127.0.0.1 by a CA of its own, whose
// certificate goes into the webhook configuration's caBundle.
type WebhookServer struct {
	// CABundle is the PEM certificate of the CA that issued the server's
	// certificate.
	CABundle []byte

	base string
	srv  *http.Server
}

// ServeWebhook serves handler over TLS on a free loopback port until Close.
func ServeWebhook(handler http.Handler) (*WebhookServer, error) {
	ca, err := certs.NewCA("vigiltest-webhook-ca", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	serving, err := ca.Issue([]string{"127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	pair, err := serving.TLSCertificate()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook server: listen: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
	}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return &WebhookServer{CABundle: ca.CertPEM, base: "https://" + ln.Addr().String(), srv: srv}, nil
}

// URL returns the https URL of path on the server, for a webhook's
// clientConfig.url.
func (w *WebhookServer) URL(path string) string {
	return w.base + "/" + strings.TrimPrefix(path, "/")
}

// Close stops the server.
func (w *WebhookServer) Close() error { return w.srv.Close() }

// AdmissionFunc adapts a function of an AdmissionRequest into an http.Handler
// that speaks AdmissionReview v1. The response's UID is filled in; a nil
// response allows.
type AdmissionFunc func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

var _ http.Handler = AdmissionFunc(nil)

// ServeHTTP implements http.Handler.
func (f AdmissionFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	body, err := io.ReadAll(io.LimitReader(r.Body, 7<<20))
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err == nil && review.Request == nil {
		err = errors.New("expected an AdmissionReview with a request, got none")
	}
	if err != nil {
		http.Error(w, "decode AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp := f(review.Request)
	if resp == nil {
		resp = &admissionv1.AdmissionResponse{Allowed: true}
	}
	resp.UID = review.Request.UID
	review.Request = nil
	review.Response = resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}
