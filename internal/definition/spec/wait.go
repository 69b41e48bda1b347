package spec

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/gate"
)

// WaitMode says how many of the selected objects must satisfy the condition.
type WaitMode int

const (
	// WaitAny: at least one selected object satisfies it (the default).
	WaitAny WaitMode = iota
	// WaitAll: every selected object satisfies it, and there is at least one
	// (unless the condition holds for no object at all, as Deleted does).
	WaitAll
	// WaitAtLeast: at least N selected objects satisfy it.
	WaitAtLeast
)

// Wait is what an object gate waits for: the engine (internal/runtime/waitfor)
// watches for it.
type Wait struct {
	GVK schema.GroupVersionKind
	// Namespace to look in; empty for cluster-scoped kinds or all namespaces.
	Namespace string
	// Name of the one object to wait for; empty to select by labels and fields.
	Name   string
	Labels labels.Selector
	Fields fields.Selector
	Cond   gate.Cond
	Mode   WaitMode
	N      int
}

// Describe says in words what s waits for, as logs and plans show it.
func (s Wait) Describe() string {
	var b strings.Builder
	b.WriteString(s.GVK.Kind)
	if s.GVK.Group != "" {
		b.WriteString("." + s.GVK.Group)
	}
	switch {
	case s.Name != "" && s.Namespace != "":
		fmt.Fprintf(&b, " %s/%s", s.Namespace, s.Name)
	case s.Name != "":
		fmt.Fprintf(&b, " %s", s.Name)
	default:
		sel := []string{}
		if s.Labels != nil && !s.Labels.Empty() {
			sel = append(sel, "labels "+s.Labels.String())
		}
		if s.Fields != nil && !s.Fields.Empty() {
			sel = append(sel, "fields "+s.Fields.String())
		}
		if s.Namespace != "" {
			sel = append(sel, "in "+s.Namespace)
		}
		switch s.Mode {
		case WaitAll:
			b.WriteString(" (all")
		case WaitAtLeast:
			fmt.Fprintf(&b, " (at least %d", s.N)
		default:
			b.WriteString(" (any")
		}
		for _, x := range sel {
			b.WriteString(", " + x)
		}
		b.WriteString(")")
	}
	if s.Cond != nil {
		b.WriteString(": " + s.Cond.String())
	}
	return b.String()
}
