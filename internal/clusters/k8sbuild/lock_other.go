//go:build !unix

package k8sbuild

import (
	"context"
	"fmt"
	"io"
	"runtime"
)

func lock(context.Context, string, io.Writer) (func(), error) {
	return nil, fmt.Errorf("building the control plane is supported on Linux and macOS, not %s: build kube-apiserver, etcd and kubectl elsewhere and set KUBEBUILDER_ASSETS to their folder", runtime.GOOS)
}
