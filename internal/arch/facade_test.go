package arch

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// facadeLines is the most lines the root package's hand-written source may
// hold: its declarations, each a call into internal/definition/define,
// which holds the checks.
const facadeLines = 1200

// generated is the line Go's convention puts in a generated file.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// The root package, what an author reads with go doc, holds declarations:
// what checks or builds a definition goes to internal/definition/define.
// Generated files (the builders' spelled-out methods) are not counted.
func TestTheFacadeHoldsDeclarations(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	lines, counted := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if generated.Match(data) {
			continue
		}
		counted++
		lines += bytes.Count(data, []byte("\n"))
	}
	if counted == 0 {
		t.Fatal("found no source of the root package two folders up: run the test from internal/arch")
	}
	if lines >= facadeLines {
		t.Errorf("the root package holds %d lines of hand-written source in %d files, expected under %d: move what checks or builds a definition into internal/definition/define, and keep the root to declarations that call it", lines, counted, facadeLines)
	}
}
