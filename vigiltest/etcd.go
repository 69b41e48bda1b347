package vigiltest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// CompactEtcd compacts etcd's history up to its current revision and returns
// that revision. A watch that then resumes from an older resourceVersion gets
// 410 Gone — provided the API server's watch cache is off
// (Options.DisableWatchCache), since the cache would otherwise replay the
// events from its own history.
//
// It speaks to etcd through etcd's JSON gateway (/v3/kv/...), so a module's
// tests do not compile etcd's gRPC client.
func (e *Env) CompactEtcd(ctx context.Context) (int64, error) {
	if e.node != nil {
		return 0, fmt.Errorf("CompactEtcd: the Env runs a node (Options.Node), whose etcd is the node's own: compact in an Env without Node")
	}
	base := e.cp.EtcdURL().String()
	var rangeResp struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	probe := base64.StdEncoding.EncodeToString([]byte("/vigiltest/compaction-probe"))
	if err := etcdCall(ctx, base+"/v3/kv/range", map[string]any{"key": probe}, &rangeResp); err != nil {
		return 0, fmt.Errorf("read etcd's revision: %w", err)
	}
	rev, err := strconv.ParseInt(rangeResp.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read etcd's revision: header.revision %q: expected a number", rangeResp.Header.Revision)
	}
	if err := etcdCall(ctx, base+"/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil); err != nil {
		return 0, fmt.Errorf("compact etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

// etcdCall posts body as JSON to one of etcd's gateway endpoints and decodes
// its answer into out, when out is not nil.
func etcdCall(ctx context.Context, url string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(raw))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
