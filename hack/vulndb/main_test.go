package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestBuildWritesTheV1Layout(t *testing.T) {
	osv := t.TempDir()
	entries := map[string]string{
		"GO-2099-0001.json": `{"id":"GO-2099-0001","modified":"2099-01-02T00:00:00Z","affected":[
			{"package":{"name":"example.com/b"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.2.0"},{"introduced":"1.3.0"},{"fixed":"1.10.1"}]}]},
			{"package":{"name":"example.com/a"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"2.0.0"},{"introduced":"2.1.0"}]}]}]}`,
		"GO-2099-0000.json": `{"id":"GO-2099-0000","modified":"0001-01-01T00:00:00Z","affected":[
			{"package":{"name":"example.com/b"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"0.9.0"}]}]}]}`,
	}
	for name, body := range entries {
		if err := os.WriteFile(filepath.Join(osv, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "db")
	n, err := build(osv, out, time.Date(2098, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil || n != 2 {
		t.Fatalf("build: %d entries, %v; want 2, nil", n, err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := read("index/db.json"), `{"modified":"2099-01-02T00:00:00Z"}`; got != want {
		t.Errorf("index/db.json = %s; want %s", got, want)
	}
	// Sorted by path, then ID; 1.10.1 beats 1.2.0 as SemVer, and a range
	// re-introduced after its last fix has no fix.
	want := `[{"path":"example.com/a","vulns":[{"id":"GO-2099-0001","modified":"2099-01-02T00:00:00Z"}]},` +
		`{"path":"example.com/b","vulns":[{"id":"GO-2099-0000","modified":"0001-01-01T00:00:00Z","fixed":"0.9.0"},` +
		`{"id":"GO-2099-0001","modified":"2099-01-02T00:00:00Z","fixed":"1.10.1"}]}]`
	if got := read("index/modules.json"); got != want {
		t.Errorf("index/modules.json =\n%s\nwant\n%s", got, want)
	}
	if got := read("ID/GO-2099-0000.json"); got != entries["GO-2099-0000.json"] {
		t.Errorf("ID/GO-2099-0000.json = %s; want the entry as it came", got)
	}
}

func TestBuildRefusesAnEntryUnderAnotherName(t *testing.T) {
	osv := t.TempDir()
	if err := os.WriteFile(filepath.Join(osv, "GO-2099-0002.json"), []byte(`{"id":"GO-2099-0003"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "db")
	if _, err := build(osv, out, time.Time{}); err == nil {
		t.Fatal("build accepted GO-2099-0003 in GO-2099-0002.json")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a failed build left %s (%v)", out, err)
	}
}
