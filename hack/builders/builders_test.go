package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// builders_gen.go is what the template makes: a change to one without the
// other fails here.
func TestTheGeneratedBuildersAreCurrent(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "builders_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("builders_gen.go is not what hack/builders/methods.go.tmpl makes: run `go generate .` (go run ./hack/builders) and commit the result")
	}
}
