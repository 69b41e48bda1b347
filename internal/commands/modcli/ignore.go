package modcli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
)

// addIgnoreFlag adds --ignore-namespace, the deployment's ignored namespaces
// (the chart's ignoredNamespaces), to a role that admits or watches.
func addIgnoreFlag(fs *pflag.FlagSet, to *[]string) {
	fs.StringSliceVar(to, strings.TrimPrefix(manifests.IgnoreFlag, "--"), nil, "a namespace the module keeps away from besides its own Options.IgnoredNamespaces: no webhook, check, watch or audit sees it (repeatable; give every admission and watcher replica the same)")
}

// ignore adds the namespaces --ignore-namespace gives to the module's
// ignored ones, refusing what is no namespace name.
func ignore(m *spec.Module, namespaces []string) error {
	if err := checkIgnored(m, namespaces); err != nil {
		return err
	}
	m.IgnoreNamespaces(namespaces...)
	return nil
}

// checkIgnored refuses an --ignore-namespace that is no namespace name, or
// the module's own.
func checkIgnored(m *spec.Module, namespaces []string) error {
	for _, ns := range namespaces {
		if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
			return fmt.Errorf("--ignore-namespace %q: expected a namespace name: %s", ns, strings.Join(problems, "; "))
		}
		if ns == m.Namespace {
			return fmt.Errorf("--ignore-namespace %q: that is module %s's own namespace, which its webhooks skip already and its watches must see", ns, m.Name)
		}
	}
	return nil
}
