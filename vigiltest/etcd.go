package vigiltest

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// CompactEtcd compacts etcd's history up to its current revision and returns
// that revision. A watch that then resumes from an older resourceVersion gets
// 410 Gone — provided the API server's watch cache is off
// (Options.DisableWatchCache), since the cache would otherwise replay the
// events from its own history.
func (e *Env) CompactEtcd(ctx context.Context) (int64, error) {
	if e.node != nil {
		return 0, fmt.Errorf("CompactEtcd: the Env runs a node (Options.Node), whose etcd is the node's own: compact in an Env without Node")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{e.cp.EtcdURL().String()},
		DialTimeout: 5 * time.Second,
		Context:     ctx,
	})
	if err != nil {
		return 0, fmt.Errorf("connect to etcd at %s: %w", e.cp.EtcdURL(), err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/vigiltest/compaction-probe")
	if err != nil {
		return 0, fmt.Errorf("read etcd revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("compact etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
