// Command vulndb turns a folder of OSV entries — the data/osv folder of the
// golang.org/x/vulndb module, as the Go module proxy serves it — into a
// vulnerability database in the v1 layout that `govulncheck -db file://DIR`
// reads (https://go.dev/security/vuln/database#api):
//
//	index/db.json       {"modified": the newest entry's modified time}
//	index/modules.json  [{"path", "vulns": [{"id", "modified", "fixed"}]}], sorted
//	ID/<GO-ID>.json     each OSV entry as it came
//
// It writes into a temporary folder beside -out and renames it into place,
// so a database is either whole or absent. hack/vulndb.sh runs it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

// entry is the part of an OSV entry the index needs.
type entry struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
		Ranges []osvRange `json:"ranges"`
	} `json:"affected"`
}

type osvRange struct {
	Type   string `json:"type"`
	Events []struct {
		Introduced string `json:"introduced"`
		Fixed      string `json:"fixed"`
	} `json:"events"`
}

type dbMeta struct {
	Modified time.Time `json:"modified"`
}

type moduleMeta struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

type moduleVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Fixed    string    `json:"fixed,omitempty"`
}

func main() {
	osvDir := flag.String("osv", "", "folder of OSV entries, one <ID>.json each")
	out := flag.String("out", "", "folder to write the database to (must not exist)")
	modified := flag.String("modified", "", "the data's own time (RFC 3339), for index/db.json when it is newer than every entry's")
	flag.Parse()
	if *osvDir == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: vulndb -osv DIR -out DIR")
		os.Exit(2)
	}
	var since time.Time
	if *modified != "" {
		t, err := time.Parse(time.RFC3339, *modified)
		if err != nil {
			fmt.Fprintln(os.Stderr, "vulndb: -modified:", err)
			os.Exit(2)
		}
		since = t
	}
	n, err := build(*osvDir, *out, since)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulndb:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "vulndb: %d entries written to %s\n", n, *out)
}

// build writes the database of the entries in osvDir to out and returns the
// number of entries. The database's modified time is the newest entry's, or
// modified if that is newer (the entries in golang.org/x/vulndb's data/osv
// carry no modified time of their own: it is set when the database is
// published).
func build(osvDir, out string, modified time.Time) (int, error) {
	files, err := filepath.Glob(filepath.Join(osvDir, "*.json"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no OSV entries in %s", osvDir)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), filepath.Base(out)+".tmp-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Join(tmp, "ID"), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(tmp, "index"), 0o755); err != nil {
		return 0, err
	}
	db := dbMeta{Modified: modified.UTC()}
	modules := map[string]*moduleMeta{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		if filepath.Base(f) != e.ID+".json" {
			return 0, fmt.Errorf("%s: holds entry %q; want one file <ID>.json per entry", f, e.ID)
		}
		if e.Modified.After(db.Modified) {
			db.Modified = e.Modified
		}
		for _, a := range e.Affected {
			m := modules[a.Package.Name]
			if m == nil {
				m = &moduleMeta{Path: a.Package.Name, Vulns: []moduleVuln{}}
				modules[a.Package.Name] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified, Fixed: nonSupersededFix(a.Ranges)})
		}
		if err := os.WriteFile(filepath.Join(tmp, "ID", e.ID+".json"), b, 0o644); err != nil {
			return 0, err
		}
	}
	index := make([]*moduleMeta, 0, len(modules))
	for _, m := range modules {
		sort.SliceStable(m.Vulns, func(i, j int) bool { return m.Vulns[i].ID < m.Vulns[j].ID })
		index = append(index, m)
	}
	sort.Slice(index, func(i, j int) bool { return index[i].Path < index[j].Path })
	if err := writeJSON(filepath.Join(tmp, "index", "db.json"), db); err != nil {
		return 0, err
	}
	if err := writeJSON(filepath.Join(tmp, "index", "modules.json"), index); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return 0, err
	}
	return len(files), nil
}

// nonSupersededFix is the latest fixed version of the SEMVER ranges that no
// later introduction supersedes, "" if there is none: what the v1 index
// calls "fixed" (govulncheck's own rule, internal/semver.NonSupersededFix).
func nonSupersededFix(ranges []osvRange) string {
	var latest string
	for _, r := range ranges {
		if r.Type != "SEMVER" {
			continue
		}
		for _, e := range r.Events {
			if e.Fixed != "" && less(latest, e.Fixed) {
				latest = e.Fixed
			}
		}
		for _, e := range r.Events {
			if e.Introduced != "" && e.Introduced != "0" && less(latest, e.Introduced) {
				latest = ""
				break
			}
		}
	}
	return latest
}

// less compares two OSV versions (SemVer with a "v", a "go" or no prefix,
// as govulncheck reads them); "" and other invalid versions are less than
// every valid one.
func less(a, b string) bool {
	return semver.Compare(canon(a), canon(b)) < 0
}

func canon(v string) string {
	return "v" + strings.TrimPrefix(strings.TrimPrefix(v, "v"), "go")
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
