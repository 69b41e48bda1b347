package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The filters a binding or a watch can be narrowed with, as the module API
// offers them.

// InNamespace selects objects in one of the namespaces.
func InNamespace(namespaces ...string) Filter {
	return Filter{Describe: fmt.Sprintf("in namespaces %v", namespaces), Match: func(m Meta) bool {
		return slices.Contains(namespaces, m.Namespace)
	}, CEL: "request.namespace in " + celList(namespaces)}
}

// NotInNamespace selects objects in none of the namespaces: the module's
// ignored ones, on every watch.
func NotInNamespace(namespaces ...string) Filter {
	return Filter{Describe: fmt.Sprintf("not in ignored namespaces %v", namespaces), Match: func(m Meta) bool {
		return !slices.Contains(namespaces, m.Namespace)
	}, CEL: "!(request.namespace in " + celList(namespaces) + ")"}
}

// NotNamed selects objects named none of names: the module's ignored
// Namespaces, on a watch of Namespaces.
func NotNamed(names ...string) Filter {
	return Filter{Describe: fmt.Sprintf("not the ignored Namespaces %v", names), Match: func(m Meta) bool {
		return !slices.Contains(names, m.Object.Name)
	}, CEL: "!(object.metadata.name in " + celList(names) + ")"}
}

// InNamespaceRegex selects objects in namespaces matching re.
func InNamespaceRegex(re *regexp.Regexp) Filter {
	return Filter{Describe: "in namespaces matching " + re.String(), Match: func(m Meta) bool {
		return re.MatchString(m.Namespace)
	}, CEL: fmt.Sprintf("request.namespace.matches(%s)", strconv.Quote(re.String()))}
}

// WithName selects the object of this name.
func WithName(name string) Filter {
	return Filter{Describe: "named " + name, Match: func(m Meta) bool { return m.Object.Name == name },
		CEL: "object.metadata.name == " + strconv.Quote(name)}
}

// WithNameRegex selects objects whose name matches re.
func WithNameRegex(re *regexp.Regexp) Filter {
	return Filter{Describe: "named like " + re.String(), Match: func(m Meta) bool { return re.MatchString(m.Object.Name) },
		CEL: fmt.Sprintf("object.metadata.name.matches(%s)", strconv.Quote(re.String()))}
}

// WithLabel selects objects with the label, and the value when given.
func WithLabel(key string, value ...string) Filter {
	return mapFilter("label", "labels", key, value, func(m Meta) map[string]string { return m.Object.Labels })
}

// WithAnnotation selects objects with the annotation, and the value when given.
func WithAnnotation(key string, value ...string) Filter {
	return mapFilter("annotation", "annotations", key, value, func(m Meta) map[string]string { return m.Object.Annotations })
}

func mapFilter(what, field, key string, value []string, get func(Meta) map[string]string) Filter {
	has := fmt.Sprintf("has(object.metadata.%s) && %s in object.metadata.%s", field, strconv.Quote(key), field)
	if len(value) == 0 {
		return Filter{Describe: what + " " + key, Match: func(m Meta) bool {
			_, ok := get(m)[key]
			return ok
		}, CEL: has}
	}
	want := value[0]
	return Filter{Describe: what + " " + key + "=" + want, Match: func(m Meta) bool {
		v, ok := get(m)[key]
		return ok && v == want
	}, CEL: fmt.Sprintf("%s && object.metadata.%s[%s] == %s", has, field, strconv.Quote(key), strconv.Quote(want))}
}

// WithDeletionTimestamp selects objects that are being deleted.
func WithDeletionTimestamp() Filter {
	return Filter{Describe: "being deleted", Match: func(m Meta) bool { return m.Object.DeletionTimestamp != nil },
		CEL: "has(object.metadata.deletionTimestamp)"}
}

// celList is a CEL list of strings.
func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
