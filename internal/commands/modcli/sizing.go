package modcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/sizing"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
)

// ErrTooLarge is returned by `plan --cluster` when a role's informers
// would not fit its memory limit at the cluster's size.
var ErrTooLarge = errors.New("a role's informers exceed its memory limit")

// writeSizing prints what each role's informers hold at the cluster's
// size, and whether the role fits its limit's GOMEMLIMIT (90% of it) in
// steady state and during a relist of every informer.
func writeSizing(out io.Writer, infs []sizing.Informer, limits map[string]int64) error {
	if len(infs) == 0 {
		return nil // no role starts an informer: nothing grows with the cluster
	}
	fmt.Fprintf(out, "\nmemory at this cluster's size (each informer's objects counted; the heap of one measured on up to %d of them, as the informer holds them):\n", sizing.Sample)
	var over []string
	for _, role := range []string{spec.PodAdmission, spec.PodWatcher} {
		var mine []sizing.Informer
		for _, i := range infs {
			if i.Role == role {
				mine = append(mine, i)
			}
		}
		if len(mine) == 0 {
			continue
		}
		for _, i := range mine {
			holds := "whole objects"
			if i.Metadata {
				holds = "metadata only"
			}
			if i.Unread != nil {
				fmt.Fprintf(out, "  %s: %s (%s, %s): not counted: %v\n", role, i.GVK.Kind, holds, i.Selection, i.Unread)
				continue
			}
			fmt.Fprintf(out, "  %s: %s (%s, %s): %d objects × %s = %s\n", role, i.GVK.Kind, holds, i.Selection, i.Objects, size(i.Bytes), size(i.Total()))
		}
		steady, peak := sizing.Need(role, infs)
		limit := limits[role]
		budget := limit / 10 * 9 // GOMEMLIMIT
		line := fmt.Sprintf("  %s: about %s steady, %s during a relist (%s base; relists at %.2f× whole, %.2f× metadata), against GOMEMLIMIT %s of its %s limit",
			role, size(steady), size(peak), size(sizing.Base), sizing.RelistWhole, sizing.RelistMetadata, size(budget), quantity(limit))
		if peak <= budget {
			fmt.Fprintln(out, line+": fits")
			continue
		}
		need := sizing.Limit(peak)
		fmt.Fprintf(out, "%s: DOES NOT FIT: set --%s-memory-limit (the chart's %s.resources.limits.memory) to at least %s, read by metadata alone what handlers only read the metadata of (vigil.Metadata), or select less (InNamespace, WithLabel)\n",
			line, role, role, quantity(need))
		over = append(over, fmt.Sprintf("%s needs %s, has %s", role, quantity(need), quantity(limit)))
	}
	if len(over) > 0 {
		return fmt.Errorf("%w: %s", ErrTooLarge, strings.Join(over, "; "))
	}
	return nil
}

// size is bytes in KiB, MiB or GiB, one decimal.
func size(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// quantity is bytes as a Kubernetes memory quantity (512Mi).
func quantity(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

// memoryFlags are the roles' memory limits an install sets: given, or with
// --cluster raised to what the roles' informers need on a cluster.
type memoryFlags struct {
	Admission, Watcher  string
	Cluster             bool
	Kubeconfig, Context string
}

func (f *memoryFlags) addFlags(fs *pflag.FlagSet, cluster bool) {
	fs.StringVar(&f.Admission, "admission-memory-limit", manifests.AdmissionMemoryLimit, "the admission containers' memory limit; GOMEMLIMIT follows it")
	fs.StringVar(&f.Watcher, "watcher-memory-limit", manifests.WatcherMemoryLimit, "the watcher container's memory limit; GOMEMLIMIT follows it")
	if cluster {
		fs.BoolVar(&f.Cluster, "cluster", false, "raise each memory limit to what the role's informers need at the size of the cluster the kubeconfig names, measured as plan --cluster measures it")
		fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "with --cluster: kubeconfig file; KUBECONFIG or ~/.kube/config otherwise")
		fs.StringVar(&f.Context, "context", "", "with --cluster: kubeconfig context")
	}
}

// check refuses a limit no container can run under, and a kubeconfig
// without --cluster.
func (f *memoryFlags) check() error {
	for flag, limit := range map[string]string{"--admission-memory-limit": f.Admission, "--watcher-memory-limit": f.Watcher} {
		if err := manifests.CheckMemoryLimit(limit); err != nil {
			return fmt.Errorf("%s %q: %w", flag, limit, err)
		}
	}
	if !f.Cluster && (f.Kubeconfig != "" || f.Context != "") {
		return errors.New("--kubeconfig, --context: the cluster is read with --cluster only: add --cluster to size the memory limits for it")
	}
	return nil
}

// sized are the limits, with --cluster each raised to what its role's
// informers need on the cluster (said on out); never lowered.
func (f *memoryFlags) sized(ctx context.Context, m *spec.Module, out io.Writer) (admission, watcher string, err error) {
	admission, watcher = f.Admission, f.Watcher
	if !f.Cluster {
		return admission, watcher, nil
	}
	cfg, err := cmdutil.LoadConfig(f.Kubeconfig, f.Context)
	if err != nil {
		return "", "", fmt.Errorf("--cluster: %w", err)
	}
	infs, err := sizing.Measure(ctx, cfg, m)
	if err != nil {
		return "", "", fmt.Errorf("--cluster: size the informers: %w", err)
	}
	for _, l := range []struct {
		role  string
		limit *string
	}{{spec.PodAdmission, &admission}, {spec.PodWatcher, &watcher}} {
		var mine []sizing.Informer
		objects := 0
		for _, i := range infs {
			switch {
			case i.Role != l.role:
			case i.Unread != nil:
				fmt.Fprintf(out, "%s: %s (%s) not counted: %v\n", l.role, i.GVK.Kind, i.Selection, i.Unread)
			default:
				mine = append(mine, i)
				objects += i.Objects
			}
		}
		if len(mine) == 0 {
			continue
		}
		_, peak := sizing.Need(l.role, mine)
		need := sizing.Limit(peak)
		if q := resource.MustParse(*l.limit); need <= q.Value() {
			fmt.Fprintf(out, "%s: %s holds its informers' %d objects on this cluster (%s during a relist)\n", l.role, *l.limit, objects, size(peak))
			continue
		}
		sized := quantity(need)
		fmt.Fprintf(out, "%s: memory limit %s, sized for its informers' %d objects on this cluster (%s during a relist; %s would not hold them)\n", l.role, sized, objects, size(peak), *l.limit)
		*l.limit = sized
	}
	return admission, watcher, nil
}
