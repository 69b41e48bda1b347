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
	". -> internal/commands/modcli": "vigil.Run is the module's entry point: it hands the spec to the command line, which runs a role",
	// The kit runs a module's webhooks in process, as `<module> test` does.
	"vigiltest -> .":                            "vigiltest.Review and Cases take the module its author defines",
	"vigiltest/node -> vigiltest":               "node.Start is what vigiltest.Options.Node runs, and returns a vigiltest.Node",
	"vigiltest -> internal/commands/policytest": "vigiltest.Review and Cases run the module's webhooks in process, as `<module> test` does",
	// The build of the control plane starts from a program that links only
	// the builder, so that a fresh machine's first step compiles in seconds.
	"hack/control-plane -> internal/clusters/k8sbuild":    "make control-plane builds Kubernetes from a program that needs nothing else",
	"hack/control-plane -> internal/clusters/kubeversion": "make control-plane takes the release as every tool does",
	// The release builds with the builds' heartbeat and writes the SBOM
	// vigil image writes.
	"hack/release -> internal/clusters/gobuild":   "make release shows a cross-build's progress as every build does",
	"hack/release -> internal/shipping/image":     "make release writes each binary's SBOM as vigil image does",
	"hack/release -> internal/shipping/changelog": "make release takes its version from the changelog as make api-check reads it",
	"hack/api -> internal/shipping/changelog":     "make api-check reads the releases from the changelog as make release does",
}

// layer is each package's layer and the vigil packages it may import, by
// path below the module ("." is package vigil itself). A package missing
// here, or an import missing from its list, fails TestImportsFollowTheLayers.
var layers = map[string]struct {
	layer   string
	imports []string
}{
	// The public API.
	".":               {public, []string{"admission", "gate", "store", "provenance", "internal/definition/define", "internal/definition/spec", "internal/runtime/callctx", "internal/runtime/handoff", "internal/definition/scheme", "internal/runtime/progress", "internal/commands/modcli"}},
	"admission":       {public, []string{"store"}},
	"gate":            {public, []string{"internal/definition/celversion", "internal/clusters/kubeversion"}},
	"store":           {public, []string{"store/v1alpha1", "internal/serving/warming"}},
	"store/v1alpha1":  {public, nil},
	"provenance":      {public, nil},
	"pattern":         {public, nil},
	"vigiltest/fault": {public, []string{"internal/serving/certs"}},
	"vigiltest":       {public, []string{".", "internal/definition/define", "internal/commands/policytest", "store/v1alpha1", "internal/serving/certs", "internal/clusters/controlplane", "internal/clusters/kubeversion", "internal/clusters/gobuild", "internal/clusters/podrun", "internal/definition/spec"}},
	"vigiltest/node":  {public, []string{"vigiltest", "internal/clusters/controlplane", "internal/clusters/kubeversion", "internal/clusters/node", "internal/shipping/image"}},

	// Declarations, and what they resolve to.
	"internal/definition/define": {define, []string{"admission", "gate", "store", "internal/definition/spec", "internal/runtime/callctx", "internal/serving/fresh", "internal/definition/scheme", "internal/runtime/progress", "internal/runtime/served", "internal/definition/celversion", "internal/clusters/kubeversion", "provenance"}},
	"internal/definition/spec":   {spec, []string{"admission", "gate", "store"}},

	// Roles.
	"internal/roles/gaterun":        {role, []string{"internal/runtime/rolebind", "gate", "store", "internal/definition/spec", "internal/runtime/waitfor", "internal/runtime/events", "internal/runtime/handoff", "internal/runtime/progress", "internal/runtime/callctx", "internal/runtime/podevents", "internal/runtime/watchhealth"}},
	"internal/runtime/waitfor":      {role, []string{"gate", "internal/definition/spec", "internal/runtime/watchhealth", "internal/runtime/rolebind"}},
	"internal/runtime/rolebind":     {role, []string{"internal/definition/spec"}},
	"internal/roles/admissionrole":  {role, []string{"internal/runtime/rolebind", "store", "internal/definition/spec", "internal/serving/admit", "internal/serving/registration", "internal/runtime/served", "internal/runtime/informers", "internal/runtime/finalizers", "internal/serving/webhook", "internal/runtime/podevents", "internal/runtime/callctx", "internal/serving/certs", "internal/runtime/events", "internal/serving/gcpace", "internal/runtime/handoff", "internal/runtime/watchhealth"}},
	"internal/serving/admit":        {role, []string{"admission", "store", "internal/definition/spec", "internal/runtime/callctx", "internal/runtime/events", "internal/serving/fresh"}},
	"internal/serving/webhook":      {role, []string{"internal/runtime/events"}},
	"internal/serving/registration": {role, []string{"admission", "provenance", "internal/definition/spec", "internal/serving/admit", "internal/runtime/events", "internal/runtime/served"}},
	"internal/runtime/informers":    {role, []string{"internal/runtime/rolebind", "internal/definition/spec", "internal/definition/scheme", "internal/runtime/events", "internal/runtime/podevents", "internal/runtime/waitfor", "internal/runtime/watchhealth", "internal/serving/fresh", "internal/serving/warming"}},
	"internal/runtime/finalizers":   {role, []string{"internal/definition/spec"}},
	"internal/roles/watcher":        {role, []string{"internal/runtime/rolebind", "store", "internal/definition/spec", "internal/runtime/informers", "internal/serving/audit", "internal/serving/gcpace", "internal/serving/registration", "internal/runtime/callctx", "internal/runtime/events", "internal/serving/fresh", "internal/serving/warming", "internal/runtime/waitfor", "internal/runtime/podevents", "internal/definition/scheme", "internal/runtime/watchhealth"}},
	"internal/serving/audit":        {role, []string{"store", "internal/definition/spec", "internal/serving/admit", "internal/serving/registration", "internal/runtime/events"}},
	"internal/runtime/podevents":    {role, []string{"internal/definition/spec"}},

	// Tools.
	"internal/shipping/manifests":  {tool, []string{"store", "store/v1alpha1", "internal/definition/spec", "internal/serving/registration", "internal/definition/scheme", "internal/clusters/kubeversion", "internal/runtime/served"}},
	"internal/shipping/chart":      {tool, []string{"admission", "store/v1alpha1", "internal/definition/spec", "internal/shipping/manifests", "internal/serving/registration", "internal/clusters/kubeversion", "internal/runtime/served"}},
	"internal/operating/deadlock":  {tool, []string{"admission", "internal/definition/spec", "internal/serving/registration"}},
	"internal/operating/sizing":    {tool, []string{"internal/definition/spec"}},
	"internal/commands/modcli":     {tool, []string{"store", "store/v1alpha1", "provenance", "internal/definition/spec", "internal/commands/policytest", "internal/roles/admissionrole", "internal/roles/gaterun", "internal/roles/watcher", "internal/serving/registration", "internal/runtime/waitfor", "internal/runtime/podevents", "internal/shipping/manifests", "internal/shipping/chart", "internal/shipping/zarf", "internal/operating/deadlock", "internal/operating/sizing", "internal/commands/cmdutil", "internal/runtime/callctx", "internal/runtime/served"}},
	"internal/commands/policytest": {tool, []string{"store", "internal/definition/spec", "internal/serving/admit", "internal/runtime/callctx", "internal/definition/celversion", "internal/clusters/kubeversion"}},
	"internal/shipping/zarf":       {tool, []string{"internal/definition/spec", "internal/shipping/chart"}},
	"internal/shipping/changelog":  {tool, nil},
	"internal/commands/cmdutil":    {tool, []string{"internal/definition/spec", "internal/clusters/kubeversion"}},
	"internal/commands/dev":        {tool, []string{"internal/definition/spec", "internal/commands/policytest", "internal/serving/registration", "internal/shipping/manifests", "internal/clusters/podrun", "internal/serving/certs", "internal/clusters/controlplane", "internal/clusters/kubeversion", "internal/runtime/served", "internal/runtime/events"}},
	"internal/commands/cli":        {tool, []string{"gate", "store/v1alpha1", "internal/commands/cmdutil", "internal/clusters/controlplane", "internal/clusters/kubeversion", "internal/shipping/crdgen", "internal/commands/dev", "internal/shipping/image", "internal/clusters/node", "internal/runtime/progress", "internal/runtime/waitfor", "internal/operating/status", "internal/operating/monitor"}},
	"internal/operating/status":    {tool, []string{"internal/definition/spec", "internal/serving/registration", "internal/operating/deadlock", "internal/shipping/manifests", "internal/runtime/events", "internal/operating/locate", "internal/runtime/served"}},
	"internal/operating/monitor":   {tool, []string{"internal/runtime/events", "internal/operating/locate"}},

	// Leaves.
	"internal/runtime/callctx":       {leaf, []string{"store", "internal/serving/fresh"}},
	"internal/serving/fresh":         {leaf, nil},
	"internal/runtime/watchhealth":   {leaf, nil},
	"internal/runtime/handoff":       {leaf, nil},
	"internal/definition/scheme":     {leaf, nil},
	"internal/runtime/events":        {leaf, nil},
	"internal/runtime/progress":      {leaf, nil},
	"internal/serving/warming":       {leaf, nil},
	"internal/serving/certs":         {leaf, nil},
	"internal/clusters/controlplane": {leaf, []string{"internal/clusters/k8sbuild", "internal/clusters/kubeversion"}},
	"internal/clusters/k8sbuild":     {leaf, []string{"internal/clusters/gobuild", "internal/clusters/kubeversion"}},
	"internal/clusters/kubeversion":  {leaf, nil},
	"internal/runtime/served":        {leaf, []string{"internal/clusters/kubeversion"}},
	"internal/definition/celversion": {leaf, []string{"internal/clusters/kubeversion"}},
	"internal/clusters/gobuild":      {leaf, nil},
	"internal/shipping/image":        {leaf, nil},
	"internal/shipping/crdgen":       {leaf, nil},
	"internal/clusters/node":         {leaf, []string{"internal/serving/certs"}},
	"internal/serving/gcpace":        {leaf, nil},
	"internal/arch":                  {leaf, nil},
	"internal/clusters/podrun":       {leaf, nil},
	"internal/operating/locate":      {leaf, nil},

	// Commands and examples, which use the public API (and a demo, vigil dev).
	"cmd/vigil":          {entry, []string{"internal/commands/cli"}},
	"hack/vulndb":        {entry, nil},
	"hack/builders":      {entry, nil},
	"hack/api":           {entry, []string{"internal/shipping/changelog"}},
	"hack/release":       {entry, []string{"internal/clusters/gobuild", "internal/shipping/image", "internal/shipping/changelog"}},
	"hack/control-plane": {entry, []string{"internal/clusters/k8sbuild", "internal/clusters/kubeversion"}},
	"hack/demo":          {entry, []string{"internal/commands/dev", "provenance"}},

	// Support for vigil's own tests and soaks.
	"internal/testsupport/soak":     {tests, nil},
	"test/labeler":                  {tests, nil},
	"test/uds-core":                 {tests, nil},
	"test/clusterconfig":            {tests, nil},
	"test/scale":                    {tests, nil},
	"test/admission":                {tests, nil},
	"test/watch":                    {tests, nil},
	"test/gates":                    {tests, nil},
	"test/shipping":                 {tests, nil},
	"internal/testsupport/udscore":  {tests, []string{"provenance", "vigiltest"}},
	"internal/testsupport/meshtest": {tests, nil},
	"internal/testsupport/testenv":  {tests, []string{"internal/clusters/controlplane", "internal/clusters/kubeversion"}},
	"internal/testsupport/testkit":  {tests, []string{".", "admission", "provenance", "internal/commands/modcli", "internal/definition/define", "internal/serving/admit", "internal/serving/certs", "internal/serving/registration", "vigiltest"}},
	"internal/testsupport/bench":    {tests, []string{"vigiltest"}},
	"examples/clusterconfig":        {entry, []string{".", "admission", "gate", "store", "pattern"}},
	"examples/labeler":              {entry, []string{".", "admission"}},
	"test/labeler/listerbench":      {entry, []string{".", "admission"}},
	"test/scale/podwatch":           {entry, []string{"."}},
	"test/scale/crcache":            {entry, nil},
	"examples/phases":               {entry, []string{".", "gate", "store"}},
	"examples/quota":                {entry, []string{".", "admission"}},
	"examples/uds-core":             {entry, []string{".", "admission", "gate", "store", "pattern"}},
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
				t.Errorf("the table's arrow %s (%s -> %s) runs back up the layers (see internal/arch/doc.go): remove it, and move what %s needs down into %s or a leaf", arrow, l.layer, to, pkg, "internal/definition/spec")
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
				t.Errorf("%s imports %s: the arrow %s is refused: internal/definition/spec is the resolved definition, data only, and imports nothing that runs (see internal/arch/doc.go). "+
					"Move the type spec needs into internal/definition/spec and have %s consume it from there; keep functions that run in the roles",
					pkg, to, arrow, to)
				continue
			}
			t.Errorf("%s imports %s: the arrow %s runs back up the layers (see internal/arch/doc.go). "+
				"Move what %s needs down: data and derived names into internal/definition/spec, a helper into a leaf, a declaration check into internal/definition/define; "+
				"what a role knows only at run time reaches a handler through its context (internal/runtime/callctx), never by a call back into the facade",
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
	check("internal/definition/spec", "internal/runtime/waitfor", "internal/serving/fresh")
	check(".", "internal/roles/watcher", "internal/serving/admit", "internal/serving/registration", "internal/roles/gaterun")
	check("internal/shipping/manifests", "internal/serving/audit", "internal/roles/watcher")
	check("internal/commands/cmdutil", "internal/roles/gaterun")
	want := []string{
		"internal/definition/spec -> internal/runtime/waitfor", "internal/definition/spec -> internal/serving/fresh",
		". -> internal/roles/watcher", ". -> internal/serving/admit", ". -> internal/serving/registration", ". -> internal/roles/gaterun",
		"internal/shipping/manifests -> internal/serving/audit", "internal/shipping/manifests -> internal/roles/watcher",
		"internal/commands/cmdutil -> internal/roles/gaterun",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the table allows arrows that must stay out: refused %v, want %v refused", got, want)
	}
}
