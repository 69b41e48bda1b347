package webhook_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/vigilkit/vigil/internal/serving/webhook"
)

// BenchmarkServe sends small reviews through the whole server — the
// listener's limits, TLS, the request limits — over keep-alive
// connections (what the API server does) and over a new connection each
// (the accept path alone), 16 clients at once.
func BenchmarkServe(b *testing.B) {
	s := serveWith(b, webhook.Limits{}, echo)
	body := bytes.Repeat([]byte("x"), 2<<10)
	for _, c := range []struct {
		name      string
		keepAlive bool
	}{{"keepalive", true}, {"newconn", false}} {
		b.Run(c.name, func(b *testing.B) {
			tr := &http.Transport{TLSClientConfig: s.tlsConfig.Clone(), DisableKeepAlives: !c.keepAlive, MaxIdleConnsPerHost: 16}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			b.SetParallelism(8) // 16 clients on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(s.base+"/validate/x", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
