package crdgen

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/controller-tools/pkg/crd"
	"sigs.k8s.io/controller-tools/pkg/genall"
	"sigs.k8s.io/controller-tools/pkg/loader"
)

// Generate writes to dir one file per CustomResourceDefinition of the Go
// types in the packages paths names (as go build takes them, such as
// ./api/...), resolved from the folder the process runs in, and returns the
// files written, sorted. The types are those controller-gen's crd generator
// takes: a root type marked // +kubebuilder:object:root=true in a package
// marked // +groupName=<group>.
func Generate(dir string, paths ...string) ([]string, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("expected the Go packages of the types, as go build takes them (./api/...)")
	}
	var gen genall.Generator = crd.Generator{}
	rt, err := genall.Generators{&gen}.ForRoots(paths...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w: expected the Go packages of the module's types, as go build takes them from this folder (./api/...)", strings.Join(paths, " "), err)
	}
	out := &recorder{dir: dir}
	var errs bytes.Buffer
	rt.OutputRules = genall.OutputRules{Default: out}
	rt.ErrorWriter = &errs
	if rt.Run() {
		msg := strings.TrimSpace(errs.String())
		if msg == "" {
			msg = "see the errors above"
		}
		return out.files, fmt.Errorf("generate the CRDs of %s: %s", strings.Join(paths, " "), msg)
	}
	if len(out.files) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition in %s: expected a root type marked // +kubebuilder:object:root=true in a package marked // +groupName=<group> (its doc.go or groupversion_info.go)", strings.Join(paths, " "))
	}
	slices.Sort(out.files)
	return out.files, nil
}

// recorder writes the generator's files under dir and keeps their paths.
type recorder struct {
	dir   string
	files []string
}

func (r *recorder) Open(_ *loader.Package, name string) (io.WriteCloser, error) {
	path := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	r.files = append(r.files, path)
	return f, nil
}
