package spec

import (
	"fmt"
	"regexp"
	"slices"
)

// The filters a binding or a watch can be narrowed with, as the module API
// offers them.

// InNamespace selects objects in one of the namespaces.
func InNamespace(namespaces ...string) Filter {
	return Filter{Describe: fmt.Sprintf("in namespaces %v", namespaces), Match: func(m Meta) bool {
		return slices.Contains(namespaces, m.Namespace)
	}}
}

// NotInNamespace selects objects in none of the namespaces: the module's
// ignored ones, on every watch.
func NotInNamespace(namespaces ...string) Filter {
	return Filter{Describe: fmt.Sprintf("not in ignored namespaces %v", namespaces), Match: func(m Meta) bool {
		return !slices.Contains(namespaces, m.Namespace)
	}}
}

// NotNamed selects objects named none of names: the module's ignored
// Namespaces, on a watch of Namespaces.
func NotNamed(names ...string) Filter {
	return Filter{Describe: fmt.Sprintf("not the ignored Namespaces %v", names), Match: func(m Meta) bool {
		return !slices.Contains(names, m.Object.Name)
	}}
}

// InNamespaceRegex selects objects in namespaces matching re.
func InNamespaceRegex(re *regexp.Regexp) Filter {
	return Filter{Describe: "in namespaces matching " + re.String(), Match: func(m Meta) bool {
		return re.MatchString(m.Namespace)
	}}
}

// WithName selects the object of this name.
func WithName(name string) Filter {
	return Filter{Describe: "named " + name, Match: func(m Meta) bool { return m.Object.Name == name }}
}

// WithNameRegex selects objects whose name matches re.
func WithNameRegex(re *regexp.Regexp) Filter {
	return Filter{Describe: "named like " + re.String(), Match: func(m Meta) bool { return re.MatchString(m.Object.Name) }}
}

// WithLabel selects objects with the label, and the value when given.
func WithLabel(key string, value ...string) Filter {
	return mapFilter("label", key, value, func(m Meta) map[string]string { return m.Object.Labels })
}

// WithAnnotation selects objects with the annotation, and the value when given.
func WithAnnotation(key string, value ...string) Filter {
	return mapFilter("annotation", key, value, func(m Meta) map[string]string { return m.Object.Annotations })
}

func mapFilter(what, key string, value []string, get func(Meta) map[string]string) Filter {
	if len(value) == 0 {
		return Filter{Describe: what + " " + key, Match: func(m Meta) bool {
			_, ok := get(m)[key]
			return ok
		}}
	}
	want := value[0]
	return Filter{Describe: what + " " + key + "=" + want, Match: func(m Meta) bool {
		v, ok := get(m)[key]
		return ok && v == want
	}}
}

// WithDeletionTimestamp selects objects that are being deleted.
func WithDeletionTimestamp() Filter {
	return Filter{Describe: "being deleted", Match: func(m Meta) bool { return m.Object.DeletionTimestamp != nil }}
}
