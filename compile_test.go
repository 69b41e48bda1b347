package vigil_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// invalid are declarations the builder types make fail to compile, each
// with what the compiler says. They were start-time mistakes of one
// builder that served admission and watches alike.
var invalid = []struct{ code, want string }{
	// A check is the API server's alone: no Go filter can precede it.
	{`vigil.When(c, &corev1.ConfigMap{}).IsCreated().WithLabel("app").Require("true", "never")`, "has no field or method Require"},
	{`vigil.When(c, &corev1.ConfigMap{}).InNamespace("apps").IsCreated().Require("true", "never")`, "has no field or method Require"},
	// A watch sees objects, not requests: no operations, no subresource.
	{`vigil.Watch(c, &corev1.ConfigMap{}).IsCreated().Finalize(func(context.Context, *corev1.ConfigMap) error { return nil })`, "has no field or method IsCreated"},
	{`vigil.Watch(c, &corev1.Pod{}).Subresource("ephemeralcontainers").Reconcile(func(context.Context, *corev1.Pod) error { return nil })`, "has no field or method Subresource"},
	// An admission binding does not reconcile, finalize or see events.
	{`vigil.When(c, &corev1.ConfigMap{}).Reconcile(func(context.Context, *corev1.ConfigMap) error { return nil })`, "has no field or method Reconcile"},
	{`vigil.When(c, &corev1.ConfigMap{}).WithName("a").Finalize(func(context.Context, *corev1.ConfigMap) error { return nil })`, "has no field or method Finalize"},
	{`vigil.When(c, &corev1.ConfigMap{}).OnEvent(func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) {})`, "has no field or method OnEvent"},
	// A gate looks in one namespace.
	{`vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("b").InNamespace("apps", "web").ToBeCreated(nil)`, "too many arguments"},
	// A label filter's value is WithLabelValue's.
	{`vigil.When(c, &corev1.ConfigMap{}).WithLabel("team", "shop").IsCreated()`, "too many arguments"},
}

// Invalid combinations of declarations fail to compile, each for the reason
// the builder types give.
func TestInvalidDeclarationsDoNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a program")
	}
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n\t\"context\"\n\n\tcorev1 \"k8s.io/api/core/v1\"\n\n\t\"github.com/vigilkit/vigil\"\n)\n\n")
	src.WriteString("var _ = context.Background\n\nfunc main() {\n\tm := vigil.NewModule(\"m\", vigil.Options{})\n\tc := m.Capability(\"c\")\n\t_ = c\n")
	first := strings.Count(src.String(), "\n") + 1
	for _, d := range invalid {
		src.WriteString("\t" + d.code + "\n")
	}
	src.WriteString("}\n")
	// A folder in the module, so the program imports this vigil; the go
	// command's patterns skip names that begin with an underscore.
	dir, err := os.MkdirTemp(".", "_invalid")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", "build", "-gcflags=-e", "-o", os.DevNull, "./"+filepath.Base(dir))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatal("the invalid declarations compiled")
	}
	for i, d := range invalid {
		line := first + i
		re := regexp.MustCompile(fmt.Sprintf(`main\.go:%d:\d+: .*%s`, line, regexp.QuoteMeta(d.want)))
		if !re.Match(out.Bytes()) {
			t.Errorf("line %d %s: the compiler does not say %q:\n%s", line, d.code, d.want, out.String())
		}
	}
	if n := strings.Count(out.String(), "main.go:"); n != len(invalid) {
		t.Errorf("%d compile errors, want one per declaration (%d):\n%s", n, len(invalid), out.String())
	}
}
