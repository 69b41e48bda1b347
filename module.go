package vigil

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Options configure a module.
type Options struct {
	// Namespace the module runs in; "vigil-system" when empty.
	Namespace string
}

// DefaultNamespace is the namespace of a module whose Options name none.
const DefaultNamespace = "vigil-system"

// Module is the definition of a module: what it waits for, admits, watches and
// stores. Build it with NewModule and the entry functions of this package.
type Module struct {
	name      string
	namespace string

	mu   sync.Mutex
	errs []error
}

// NewModule starts the definition of the module called name, which must be a
// DNS-1123 label: it names the module's Kubernetes objects.
func NewModule(name string, opts Options) *Module {
	m := &Module{name: name, namespace: opts.Namespace}
	if m.namespace == "" {
		m.namespace = DefaultNamespace
	}
	if problems := validation.IsDNS1123Label(name); len(problems) > 0 {
		m.recordf(1, "module name %q is not a valid DNS-1123 label (%s): use lower-case letters, digits and '-', like \"uds-core\"", name, strings.Join(problems, "; "))
	}
	if problems := validation.IsDNS1123Label(m.namespace); len(problems) > 0 {
		m.recordf(1, "Options.Namespace %q is not a valid namespace name (%s)", m.namespace, strings.Join(problems, "; "))
	}
	return m
}

// Name is the module's name.
func (m *Module) Name() string { return m.name }

// Namespace is the namespace the module runs in.
func (m *Module) Namespace() string { return m.namespace }

// Validate reports every mistake recorded while the module was declared, each
// with the call site that made it.
func (m *Module) Validate() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(m.errs...)
}

// recordf records a definition error, prefixed with the file and line of the
// caller skip frames above recordf's caller.
func (m *Module) recordf(skip int, format string, args ...any) {
	err := fmt.Errorf(format, args...)
	if _, file, line, ok := runtime.Caller(skip + 1); ok {
		err = fmt.Errorf("%s:%d: %w", filepath.Base(file), line, err)
	}
	m.mu.Lock()
	m.errs = append(m.errs, err)
	m.mu.Unlock()
}
