package vigil_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every example, its tests among it, builds on the public API alone, so that
// it can be copied into a module project of its own: no example imports a
// package of vigil's internal/.
func TestExamplesUsePublicAPIOnly(t *testing.T) {
	files := 0
	err := filepath.WalkDir("examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/vigilkit/vigil/internal/") {
				t.Errorf("%s imports %s: examples use vigil's public API only (a helper a module needs belongs in vigiltest or the vigil package)", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("found %d Go files under examples/: the walk missed them", files)
	}
}
