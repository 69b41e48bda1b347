package modcli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/sizing"
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
		need := (peak*10/9 + (64 << 20) - 1) / (64 << 20) * (64 << 20) // a limit whose GOMEMLIMIT holds the peak, rounded up to 64Mi
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
