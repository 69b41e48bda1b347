package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
	"golang.org/x/tools/go/packages"

	"github.com/vigilkit/vigil/internal/shipping/changelog"
)

// Public are the packages a module author imports.
var Public = []string{
	"github.com/vigilkit/vigil",
	"github.com/vigilkit/vigil/admission",
	"github.com/vigilkit/vigil/gate",
	"github.com/vigilkit/vigil/pattern",
	"github.com/vigilkit/vigil/provenance",
	"github.com/vigilkit/vigil/store",
	"github.com/vigilkit/vigil/store/v1alpha1",
	"github.com/vigilkit/vigil/vigiltest",
	"github.com/vigilkit/vigil/vigiltest/fault",
}

const file = "api/vigil.txt"

func main() {
	check := flag.Bool("check", false, "fail when "+file+" is not what the code exports, instead of writing it")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	lines, err := Listing(Public)
	if err != nil {
		return err
	}
	now := strings.Join(lines, "\n") + "\n"
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if string(old) == now {
		return nil
	}
	log, err := os.ReadFile(changelog.File)
	if err != nil {
		return fmt.Errorf("read %s: %w", changelog.File, err)
	}
	breakErr := Allowed(string(log), func(tag string) ([]string, error) {
		return Incompatible(context.Background(), ".", tag, Public)
	})
	if check {
		msg := fmt.Sprintf("%s is not what the code exports: the public API changed. Run `go run ./hack/api` and commit %s", file, file)
		if breakErr != nil {
			msg += "; that will be refused until: " + breakErr.Error()
		}
		return errors.New(msg)
	}
	if breakErr != nil {
		return breakErr
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(now), 0o644)
}

// Listing is the public API of pkgs, one sorted line per exported name.
func Listing(pkgs []string) ([]string, error) {
	loaded, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedTypes}, pkgs...)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, p := range loaded {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("load %s: %v", p.PkgPath, p.Errors[0])
		}
		lines = append(lines, exported(p.Types)...)
	}
	sort.Strings(lines)
	return lines, nil
}

// exported lists the exported names of pkg.
func exported(pkg *types.Package) []string {
	qual := func(other *types.Package) string {
		if other == pkg {
			return ""
		}
		return other.Name()
	}
	prefix := "pkg " + pkg.Path() + ", "
	var out []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.TypeName:
			out = append(out, typeLines(prefix, o, qual)...)
		case *types.Const:
			out = append(out, prefix+fmt.Sprintf("const %s %s = %s", o.Name(), types.TypeString(o.Type(), qual), o.Val().ExactString()))
		default:
			out = append(out, prefix+types.ObjectString(obj, qual))
		}
	}
	return out
}

// typeLines are a type's line, its exported fields' and its exported
// methods'.
func typeLines(prefix string, tn *types.TypeName, qual types.Qualifier) []string {
	if tn.IsAlias() {
		return []string{prefix + fmt.Sprintf("type %s = %s", tn.Name(), types.TypeString(types.Unalias(tn.Type()), qual))}
	}
	named, ok := tn.Type().(*types.Named)
	if !ok {
		return []string{prefix + types.ObjectString(tn, qual)}
	}
	head := "type " + tn.Name() + typeParams(named.TypeParams(), qual)
	var out []string
	switch u := named.Underlying().(type) {
	case *types.Struct:
		out = append(out, prefix+head+" struct")
		for i := range u.NumFields() {
			if f := u.Field(i); f.Exported() {
				embedded := ""
				if f.Embedded() {
					embedded = "embedded "
				}
				out = append(out, prefix+head+" struct, "+embedded+f.Name()+" "+types.TypeString(f.Type(), qual))
			}
		}
	case *types.Interface:
		// One line for the whole method set: a method added breaks every
		// implementer outside, so it must read as a change.
		out = append(out, prefix+head+" "+types.TypeString(u, qual))
	default:
		out = append(out, prefix+head+" "+types.TypeString(u, qual))
	}
	ms := types.NewMethodSet(types.NewPointer(named))
	for i := range ms.Len() {
		m := ms.At(i).Obj().(*types.Func)
		if !m.Exported() {
			continue
		}
		if _, isIface := named.Underlying().(*types.Interface); isIface {
			continue
		}
		sig := m.Type().(*types.Signature)
		recv := types.TypeString(sig.Recv().Type(), qual)
		s := types.TypeString(sig, qual)
		out = append(out, prefix+fmt.Sprintf("method (%s) %s%s", recv, m.Name(), strings.TrimPrefix(s, "func")))
	}
	return out
}

func typeParams(tps *types.TypeParamList, qual types.Qualifier) string {
	if tps.Len() == 0 {
		return ""
	}
	var parts []string
	for i := range tps.Len() {
		tp := tps.At(i)
		parts = append(parts, tp.Obj().Name()+" "+types.TypeString(tp.Constraint(), qual))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Allowed says whether the public API may change as it did, by what
// CHANGELOG.md (log) says: anything before the first release; after it, a
// change incompatible with the last release (incompatible lists its
// changes from that release's tag) only under an unreleased version with a
// higher minor or major than the last released one.
func Allowed(log string, incompatible func(tag string) ([]string, error)) error {
	newest, ok := changelog.Newest(log)
	if !ok {
		return fmt.Errorf("%s names no version (## vX.Y.Z — date, or — unreleased): add one", changelog.File)
	}
	last, ok := changelog.LastReleased(log)
	if !ok {
		return nil // nothing released yet: nothing to break
	}
	released := last.Version
	if newest.Unreleased() && semver.Compare(semver.MajorMinor(newest.Version), semver.MajorMinor(released)) > 0 {
		return nil
	}
	changes, err := incompatible(released)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		return nil
	}
	sample := changes
	if len(sample) > 5 {
		sample = sample[:5]
	}
	return fmt.Errorf("the change is incompatible with %s, the last release: %d incompatible change(s), such as\n  %s\nadd an unreleased minor version above %s to %s (## %s — unreleased) saying what breaks, or keep the old API",
		released, len(changes), strings.Join(sample, "\n  "), released, changelog.File, nextMinor(released))
}

// nextMinor is v with its minor raised and its patch zero.
func nextMinor(v string) string {
	var major, minor int
	_, _ = fmt.Sscanf(semver.MajorMinor(v), "v%d.%d", &major, &minor)
	return fmt.Sprintf("v%d.%d.0", major, minor+1)
}
