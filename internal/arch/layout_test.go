package arch

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// docs/layout.md names every package of the module, and nothing that is not
// one: a package added without its row, or a row left behind by a move,
// fails here. A row whose path ends in "/" names a folder; examples/ names
// every package under it, the examples being modules of their own.
func TestTheLayoutNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{} // folders the table names, "." for the root
	code := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(string(doc), "\n") {
		// The first cell: one path or more, each in backquotes.
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			if path := m[1]; path == "." || strings.HasSuffix(path, "/") {
				rows[strings.TrimSuffix(path, "/")] = true
			}
		}
	}
	const subtree = "examples"
	named := map[string]bool{}
	var missing []string
	for _, p := range list(t) {
		dir := rel(p.ImportPath)
		if dir == p.ImportPath {
			dir = "."
		}
		if dir == subtree || strings.HasPrefix(dir, subtree+"/") {
			named[subtree] = true
			continue
		}
		if !rows[dir] {
			missing = append(missing, dir+"/")
			continue
		}
		named[dir] = true
	}
	var stale []string
	for r := range rows {
		if !named[r] {
			stale = append(stale, r+"/")
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("docs/layout.md has no row for the packages %v: add a row saying what each is", missing)
	}
	if len(stale) > 0 {
		t.Errorf("docs/layout.md names %v, which hold no package of the module: remove the rows or fix the paths", stale)
	}
}
