package certs_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/serving/certs"
)

// A client that trusts only the CA completes a TLS handshake with a server
// presenting an issued certificate, by IP and by DNS name, and rejects a name
// the certificate does not carry.
func TestIssuedCertificateServesTLS(t *testing.T) {
	ca, err := certs.NewCA("vigil-test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue([]string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := srv.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		resp, err := client.Get("https://" + net.JoinHostPort(host, port))
		if err != nil {
			t.Fatalf("GET via %s: %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "ok" {
			t.Fatalf("GET via %s: body %q, want ok", host, body)
		}
	}

	other := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "elsewhere.example"}}}
	_, err = other.Get("https://127.0.0.1:" + port)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("GET with a name the certificate lacks: err = %v, want a certificate error", err)
	}
}

func TestIssueRequiresHosts(t *testing.T) {
	ca, err := certs.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(nil, time.Hour); err == nil || !strings.Contains(err.Error(), "expected at least one") {
		t.Fatalf("Issue(nil) err = %v, want an error saying a host is expected", err)
	}
}
