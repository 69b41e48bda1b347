package arch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/vigilkit/vigil"

// Layers, by name.
const (
	public = "public API"
	define = "define"
	spec   = "spec"
	role   = "roles"
	tool   = "tools"
	leaf   = "leaves"
	entry  = "commands and examples"
	tests  = "test support"
)

// downward says which layers a package of a layer may import: the arrows
// that point down. Within roles and within tools a package may import
// another of its layer.
var downward = map[string][]string{
	public: {public, define, spec, leaf},
	define: {public, spec, leaf},
	spec:   {public}, // data only: nothing that runs, not even a leaf
	role:   {public, spec, role, leaf},
	tool:   {public, spec, role, tool, leaf},
	leaf:   {public, leaf},
	entry:  {public, tool},
	tests:  {public, define, spec, role, tool, leaf}, // helpers of vigil's own tests: above everything they start
}

// vocabulary are the public packages the lower layers may import: types and
// values a handler speaks, not the facade.
var vocabulary = []string{"admission", "gate", "store", "store/v1alpha1", "provenance"}

// entryPoints are the arrows that leave the layer order on purpose.
var entryPoints = map[string]string{
	// Run hands the resolved spec to the module command line.
	". -> internal/modcli": "vigil.Run is the module's entry point: it hands the spec to the command line, which runs a role",
	// The kit runs a module's webhooks in process, as `<module> test` does.
	"vigiltest -> .":                   "vigiltest.Review and Cases take the module its author defines",
	"vigiltest -> internal/policytest": "vigiltest.Review and Cases run the module's webhooks in process, as `<module> test` does",
	// The build of the control plane starts from a program that links only
	// the builder, so that a fresh machine's first step compiles in seconds.
	"hack/control-plane -> internal/k8sbuild":    "make control-plane builds Kubernetes from a program that needs nothing else",
	"hack/control-plane -> internal/kubeversion": "make control-plane takes the release as every tool does",
}

// layer is each package's layer and the vigil packages it may import, by
// path below the module ("." is package vigil itself). A package missing
// here, or an import missing from its list, fails TestImportsFollowTheLayers.
var layers = map[string]struct {
	layer   string
	imports []string
}{
	// The public API.
	".":              {public, []string{"admission", "gate", "store", "provenance", "internal/define", "internal/spec", "internal/callctx", "internal/handoff", "internal/scheme", "internal/progress", "internal/modcli"}},
	"admission":      {public, []string{"store"}},
	"gate":           {public, []string{"internal/celversion", "internal/kubeversion"}},
	"store":          {public, []string{"store/v1alpha1", "internal/warming"}},
	"store/v1alpha1": {public, nil},
	"provenance":     {public, nil},
	"pattern":        {public, nil},
	"vigiltest":      {public, []string{".", "internal/define", "internal/policytest", "store/v1alpha1", "internal/certs", "internal/controlplane", "internal/kubeversion", "internal/gobuild", "internal/image", "internal/node", "internal/podrun", "internal/spec"}},

	// Declarations, and what they resolve to.
	"internal/define": {define, []string{"admission", "gate", "store", "internal/spec", "internal/callctx", "internal/fresh", "internal/scheme", "internal/progress", "internal/served", "internal/celversion", "internal/kubeversion", "provenance"}},
	"internal/spec":   {spec, []string{"admission", "gate", "store"}},

	// Roles.
	"internal/gaterun":       {role, []string{"gate", "store", "internal/spec", "internal/waitfor", "internal/events", "internal/handoff", "internal/progress", "internal/callctx", "internal/podevents", "internal/watchhealth"}},
	"internal/waitfor":       {role, []string{"gate", "internal/spec", "internal/watchhealth"}},
	"internal/admissionrole": {role, []string{"store", "internal/spec", "internal/admit", "internal/registration", "internal/served", "internal/watcher", "internal/webhook", "internal/podevents", "internal/callctx", "internal/certs", "internal/events", "internal/gcpace", "internal/handoff", "internal/watchhealth"}},
	"internal/admit":         {role, []string{"admission", "store", "internal/spec", "internal/callctx", "internal/events", "internal/fresh"}},
	"internal/webhook":       {role, []string{"internal/events"}},
	"internal/registration":  {role, []string{"admission", "provenance", "internal/spec", "internal/admit", "internal/events", "internal/served"}},
	"internal/watcher":       {role, []string{"store", "internal/spec", "internal/admit", "internal/audit", "internal/registration", "internal/callctx", "internal/events", "internal/fresh", "internal/warming", "internal/waitfor", "internal/podevents", "internal/scheme", "internal/watchhealth"}},
	"internal/audit":         {role, []string{"store", "internal/spec", "internal/admit", "internal/registration", "internal/events"}},
	"internal/podevents":     {role, []string{"internal/spec"}},

	// Tools.
	"internal/manifests":  {tool, []string{"store", "store/v1alpha1", "internal/spec", "internal/registration", "internal/scheme", "internal/kubeversion", "internal/served"}},
	"internal/chart":      {tool, []string{"admission", "store/v1alpha1", "internal/spec", "internal/manifests", "internal/registration", "internal/kubeversion", "internal/served"}},
	"internal/deadlock":   {tool, []string{"admission", "internal/spec", "internal/registration"}},
	"internal/modcli":     {tool, []string{"store", "store/v1alpha1", "provenance", "internal/spec", "internal/policytest", "internal/admissionrole", "internal/gaterun", "internal/watcher", "internal/registration", "internal/waitfor", "internal/podevents", "internal/manifests", "internal/chart", "internal/zarf", "internal/deadlock", "internal/cmdutil", "internal/callctx", "internal/served"}},
	"internal/policytest": {tool, []string{"store", "internal/spec", "internal/admit", "internal/callctx", "internal/celversion", "internal/kubeversion"}},
	"internal/zarf":       {tool, []string{"internal/spec", "internal/chart"}},
	"internal/cmdutil":    {tool, []string{"internal/spec", "internal/kubeversion"}},
	"internal/dev":        {tool, []string{"internal/spec", "internal/policytest", "internal/registration", "internal/manifests", "internal/podrun", "internal/certs", "internal/controlplane", "internal/kubeversion", "internal/served", "internal/events"}},
	"internal/cli":        {tool, []string{"gate", "store/v1alpha1", "internal/cmdutil", "internal/controlplane", "internal/kubeversion", "internal/crdgen", "internal/dev", "internal/image", "internal/node", "internal/progress", "internal/waitfor", "internal/status", "internal/monitor"}},
	"internal/status":     {tool, []string{"internal/spec", "internal/registration", "internal/deadlock", "internal/manifests", "internal/events", "internal/locate", "internal/served"}},
	"internal/monitor":    {tool, []string{"internal/events", "internal/locate"}},

	// Leaves.
	"internal/callctx":      {leaf, []string{"store", "internal/fresh"}},
	"internal/fresh":        {leaf, nil},
	"internal/watchhealth":  {leaf, nil},
	"internal/handoff":      {leaf, nil},
	"internal/scheme":       {leaf, nil},
	"internal/events":       {leaf, nil},
	"internal/progress":     {leaf, nil},
	"internal/warming":      {leaf, nil},
	"internal/certs":        {leaf, nil},
	"internal/controlplane": {leaf, []string{"internal/k8sbuild", "internal/kubeversion"}},
	"internal/k8sbuild":     {leaf, []string{"internal/gobuild", "internal/kubeversion"}},
	"internal/kubeversion":  {leaf, nil},
	"internal/served":       {leaf, []string{"internal/kubeversion"}},
	"internal/celversion":   {leaf, []string{"internal/kubeversion"}},
	"internal/gobuild":      {leaf, nil},
	"internal/image":        {leaf, nil},
	"internal/crdgen":       {leaf, nil},
	"internal/node":         {leaf, []string{"internal/certs"}},
	"internal/gcpace":       {leaf, nil},
	"internal/arch":         {leaf, nil},
	"internal/podrun":       {leaf, nil},
	"internal/locate":       {leaf, nil},

	// Commands and examples, which use the public API (and a demo, vigil dev).
	"cmd/vigil":          {entry, []string{"internal/cli"}},
	"hack/vulndb":        {entry, nil},
	"hack/builders":      {entry, nil},
	"hack/control-plane": {entry, []string{"internal/k8sbuild", "internal/kubeversion"}},

	// Support for vigil's own tests and soaks.
	"internal/soak":                {tests, nil},
	"internal/meshtest":            {tests, nil},
	"internal/testenv":             {tests, []string{"internal/controlplane", "internal/kubeversion"}},
	"internal/testkit":             {tests, []string{".", "internal/certs", "internal/registration", "vigiltest"}},
	"examples/clusterconfig":       {entry, []string{".", "admission", "gate", "store", "pattern"}},
	"examples/uds-core/demo":       {entry, []string{"internal/dev", "provenance"}},
	"examples/labeler":             {entry, []string{".", "admission"}},
	"examples/labeler/listerbench": {entry, []string{".", "admission"}},
	"examples/phases":              {entry, []string{".", "gate", "store"}},
	"examples/quota":               {entry, []string{".", "admission"}},
	"examples/uds-core":            {entry, []string{".", "admission", "gate", "store", "pattern"}},
}

// rel is a package's path below the module; "." for the module's own.
func rel(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

func isVigil(path string) bool { return path == module || strings.HasPrefix(path, module+"/") }

// layerOf is the layer an import is in, as the arrows of downward see it:
// the public packages other than the facade and the kit are vocabulary,
// which every layer below may speak.
func layerOf(p string) string {
	if slices.Contains(vocabulary, p) {
		return public
	}
	if p == "." || p == "vigiltest" {
		return "the facade"
	}
	return layers[p].layer
}

// The table itself points only down: an arrow added to it that runs back
// up fails here, whatever the code does.
func TestTheLayerTablePointsDown(t *testing.T) {
	for pkg, l := range layers {
		for _, imp := range l.imports {
			arrow := pkg + " -> " + imp
			if _, ok := entryPoints[arrow]; ok {
				continue
			}
			if _, ok := layers[imp]; !ok {
				t.Errorf("the table lets %s import %s, which is in no layer: add %s to the table", pkg, imp, imp)
				continue
			}
			to := layerOf(imp)
			allowed := downward[l.layer]
			if to == "the facade" {
				// Only the examples and vigil's own test support import
				// the facade.
				if l.layer != entry && l.layer != tests {
					t.Errorf("the table's arrow %s (%s -> the facade) runs back up: nothing below the public API may import the facade", arrow, l.layer)
				}
				continue
			}
			if !slices.Contains(allowed, to) {
				t.Errorf("the table's arrow %s (%s -> %s) runs back up the layers (see internal/arch/doc.go): remove it, and move what %s needs down into %s or a leaf", arrow, l.layer, to, pkg, "internal/spec")
			}
		}
	}
}

// Every vigil package imports only what the layer table allows it
// (non-test files; tests may import what they test with).
func TestImportsFollowTheLayers(t *testing.T) {
	pkgs := list(t)
	for _, p := range pkgs {
		pkg := rel(p.ImportPath)
		l, ok := layers[pkg]
		if !ok {
			t.Errorf("package %s is in no layer: add it to the table in internal/arch/arch_test.go, with the layer it belongs to and what it may import (see internal/arch/doc.go)", pkg)
			continue
		}
		for _, imp := range p.Imports {
			if !isVigil(imp) {
				continue
			}
			to := rel(imp)
			if slices.Contains(l.imports, to) {
				continue
			}
			toLayer := "no layer"
			if to2, ok := layers[to]; ok {
				toLayer = to2.layer
			}
			arrow := fmt.Sprintf("%s -> %s (%s -> %s)", pkg, to, l.layer, toLayer)
			if toLayer != "no layer" && slices.Contains(downward[l.layer], layerOf(to)) {
				t.Errorf("%s imports %s: the arrow %s points down the layers but is not in the layer table: "+
					"if %s is where this belongs, add %q to the imports of %q in internal/arch/arch_test.go; else move the code to a package that may import %s",
					pkg, to, arrow, pkg, to, pkg, to)
				continue
			}
			if l.layer == spec {
				t.Errorf("%s imports %s: the arrow %s is refused: internal/spec is the resolved definition, data only, and imports nothing that runs (see internal/arch/doc.go). "+
					"Move the type spec needs into internal/spec and have %s consume it from there; keep functions that run in the roles",
					pkg, to, arrow, to)
				continue
			}
			t.Errorf("%s imports %s: the arrow %s runs back up the layers (see internal/arch/doc.go). "+
				"Move what %s needs down: data and derived names into internal/spec, a helper into a leaf, a declaration check into internal/define; "+
				"what a role knows only at run time reaches a handler through its context (internal/callctx), never by a call back into the facade",
				pkg, to, arrow, pkg)
		}
	}
}

type goPackage struct {
	ImportPath string
	Imports    []string
	Error      *struct{ Err string }
}

// list is every package of the module, as `go list -json` reads it.
func list(t *testing.T) []goPackage {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Error", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list: %v: %s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			// An arrow that runs back up often closes a cycle: say so, and
			// go on to name the arrow.
			t.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 || rel(pkgs[0].ImportPath) == pkgs[0].ImportPath {
		t.Fatalf("go list found no package of %s in %s", module, root)
	}
	return pkgs
}

// The table leaves out the arrows that ran back up before: spec reaching
// what runs, the facade calling into roles, manifests into roles for names,
// cmdutil into a role for one error.
func TestTheTableRefusesTheBackArrows(t *testing.T) {
	var got []string
	check := func(pkg string, imports ...string) {
		l := layers[pkg]
		for _, imp := range imports {
			if !slices.Contains(l.imports, imp) {
				got = append(got, fmt.Sprintf("%s -> %s", pkg, imp))
			}
		}
	}
	check("internal/spec", "internal/waitfor", "internal/fresh")
	check(".", "internal/watcher", "internal/admit", "internal/registration", "internal/gaterun")
	check("internal/manifests", "internal/audit", "internal/watcher")
	check("internal/cmdutil", "internal/gaterun")
	want := []string{
		"internal/spec -> internal/waitfor", "internal/spec -> internal/fresh",
		". -> internal/watcher", ". -> internal/admit", ". -> internal/registration", ". -> internal/gaterun",
		"internal/manifests -> internal/audit", "internal/manifests -> internal/watcher",
		"internal/cmdutil -> internal/gaterun",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the table allows arrows that must stay out: refused %v, want %v refused", got, want)
	}
}
