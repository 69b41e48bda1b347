package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The build is the reproducible one: no cgo choice left to the machine
// (the environment sets it), paths trimmed, no VCS stamp, version and
// commit from the release.
func TestTheBuildIsReproducible(t *testing.T) {
	args := strings.Join(BuildArgs("v0.1.0", "abc", "dist/vigil-linux-amd64"), " ")
	for _, want := range []string{"-trimpath", "-buildvcs=false", cliPkg + ".Version=v0.1.0", cliPkg + ".Commit=abc", "./cmd/vigil"} {
		if !strings.Contains(args, want) {
			t.Errorf("the build %q lacks %q", args, want)
		}
	}
}

func TestSumsAreSha256sumsFormat(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"b": "world\n", "a": "hello\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Sums(dir, []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	want := "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  a\n" +
		"e258d248fda94c63753607f7c4494ee0fcbe92f1a76bfdac795c9d84101eb317  b\n"
	if got != want {
		t.Errorf("Sums =\n%s\nwant\n%s", got, want)
	}
}
