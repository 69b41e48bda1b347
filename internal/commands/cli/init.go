package cli

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/template"

	"github.com/spf13/cobra"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"k8s.io/apimachinery/pkg/util/validation"
)

// VigilModule is vigil's Go module path.
const VigilModule = "github.com/vigilkit/vigil"

// unpublishedVersion is the version a scaffold requires vigil at when a
// replace points at a local checkout: the one `go mod edit -replace` uses for
// modules that have no release.
const unpublishedVersion = "v0.0.0-00010101000000-000000000000"

// maxInitName keeps NAME-system, the module's default namespace, a valid name.
const maxInitName = validation.DNS1123LabelMaxLength - len("-system")

//go:embed scaffold/*.tmpl
var scaffoldFS embed.FS

// scaffoldFiles are the files init writes, in order, from their templates;
// go.mod is written first, from code.
// each from scaffold/<its base name>.tmpl.
var scaffoldFiles = []string{"main.go", "main_test.go", "Makefile", "README.md", "testdata/policies/configmaps.yaml"}

func newInitCommand(out io.Writer) *cobra.Command {
	o := &InitOptions{}
	cmd := &cobra.Command{
		Use:   "init NAME",
		Short: "Scaffold a module project in ./NAME that builds and passes its test at once",
		Long: `Scaffold a vigil module project in ./NAME (or --dir): go.mod, main.go with one
startup gate, one mutation and one validation, main_test.go testing them with
vigiltest against a real API server, a Makefile and a README. NAME names the
module and its Kubernetes objects: a DNS-1123 label, as in "my-module".

The go command then resolves the dependencies (go mod tidy). A folder that
exists must be empty: init never overwrites files.

vigil has no published release yet: pass --vigil-path with a checkout of vigil,
written into go.mod as a replace. Without it, init uses the released version
this vigil binary was built from, the replace the binary was built with, or the
vigil checkout the current folder is in, and fails when there is none.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("expected one argument, the module's name, as in `vigil init my-module`; got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return o.Run(cmd.Context(), out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.VigilPath, "vigil-path", "", "a local checkout of vigil, required by go.mod through a replace (written as an absolute path)")
	f.StringVar(&o.ModulePath, "module-path", "", "the project's Go module path (default example.com/NAME)")
	f.StringVar(&o.Dir, "dir", "", "the folder to scaffold into (default ./NAME); it must be missing or empty")
	return cmd
}

// InitOptions are the options of `vigil init`.
type InitOptions struct {
	Name       string
	VigilPath  string
	ModulePath string
	Dir        string
	// GoCommand runs the go command; "go" from PATH when empty.
	GoCommand string
}

// scaffoldData is what the templates see.
type scaffoldData struct {
	Name       string
	ModulePath string
	// EnvPrefix is Name as an environment variable prefix: MY_MODULE.
	EnvPrefix string
}

// Run writes the project and resolves its dependencies.
func (o *InitOptions) Run(ctx context.Context, out io.Writer) error {
	if err := checkInitName(o.Name); err != nil {
		return err
	}
	modPath := o.ModulePath
	if modPath == "" {
		modPath = "example.com/" + o.Name
	}
	if err := module.CheckImportPath(modPath); err != nil {
		return fmt.Errorf("--module-path %q: expected a Go module path, as in example.com/%s: %v", modPath, o.Name, err)
	}
	dir := o.Dir
	if dir == "" {
		dir = o.Name
	}
	if err := checkEmptyDir(dir); err != nil {
		return err
	}
	version, replace, how, err := o.vigilSource()
	if err != nil {
		return err
	}
	goCmd := o.GoCommand
	if goCmd == "" {
		goCmd = "go"
	}
	if _, err := exec.LookPath(goCmd); err != nil {
		return fmt.Errorf("vigil init needs the go command to resolve the project's dependencies and found none (%v): install Go 1.26 or later", err)
	}

	goMod, err := scaffoldGoMod(modPath, version, replace)
	if err != nil {
		return err
	}
	data := scaffoldData{Name: o.Name, ModulePath: modPath, EnvPrefix: strings.ToUpper(strings.ReplaceAll(o.Name, "-", "_"))}
	files := map[string][]byte{"go.mod": goMod}
	for _, name := range scaffoldFiles {
		tmpl, err := template.ParseFS(scaffoldFS, "scaffold/"+path.Base(name)+".tmpl")
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			return fmt.Errorf("render %s: %w", name, err)
		}
		files[name] = b.Bytes()
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	fmt.Fprintf(out, "vigil %s\n", how)
	for _, name := range append([]string{"go.mod"}, scaffoldFiles...) {
		file := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(file), err)
		}
		// O_EXCL: never overwrite, even a file that appeared since the check.
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
		_, err = f.Write(files[name])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
		fmt.Fprintf(out, "created %s\n", file)
	}

	fmt.Fprintf(out, "resolving dependencies: go mod tidy in %s\n", dir)
	tidy := exec.CommandContext(ctx, goCmd, "mod", "tidy")
	tidy.Dir = dir
	tidy.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if output, err := tidy.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod tidy in %s: %w\n%s\nThe project's files are written; fix the cause, then run `go mod tidy` in %s", dir, err, strings.TrimSpace(string(output)), dir)
	}
	fmt.Fprintf(out, "updated %s\n", filepath.Join(dir, "go.mod"))
	fmt.Fprintf(out, "created %s\n", filepath.Join(dir, "go.sum"))
	fmt.Fprintf(out, "\nModule %s is ready. Next:\n\n", o.Name)
	fmt.Fprintf(out, "  cd %s\n", dir)
	fmt.Fprintln(out, "  make test    # builds the control plane on first use (6 to 12 minutes), then runs main_test.go")
	fmt.Fprintf(out, "  make build   # bin/%s\n", o.Name)
	return nil
}

// checkInitName accepts a DNS-1123 label short enough for NAME-system.
func checkInitName(name string) error {
	problems := validation.IsDNS1123Label(name)
	if len(name) > maxInitName {
		problems = append(problems, fmt.Sprintf("it has %d characters", len(name)))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("NAME %q is not a valid module name: expected a DNS-1123 label of at most %d characters (lower-case letters, digits and '-', starting and ending with a letter or digit), because it names the module's Kubernetes objects and its namespace NAME-system; got: %s. Pick a name such as %q",
		name, maxInitName, strings.Join(problems, "; "), suggestName(name))
}

// suggestName turns a rejected name into one that would do.
func suggestName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == '_' || r == '.' || r == ' ':
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > maxInitName {
		s = strings.Trim(s[:maxInitName], "-")
	}
	if s == "" {
		return "my-module"
	}
	return s
}

// checkEmptyDir accepts a folder that is missing or empty.
func checkEmptyDir(dir string) error {
	info, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s exists and is a file: vigil init writes a project into a new or empty folder; pick another NAME or pass --dir", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	var names []string
	for i, e := range entries {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(entries)-3))
			break
		}
		names = append(names, e.Name())
	}
	return fmt.Errorf("folder %s is not empty (it holds %s): vigil init never overwrites files; expected a missing or empty folder. Pick another NAME, pass --dir with a new folder, or empty this one", dir, strings.Join(names, ", "))
}

// vigilSource decides how the project requires vigil: the version, the
// replace (an absolute path, or empty) and a line that says which.
func (o *InitOptions) vigilSource() (version, replace, how string, err error) {
	if o.VigilPath != "" {
		abs, err := checkVigilCheckout(o.VigilPath)
		if err != nil {
			return "", "", "", err
		}
		return unpublishedVersion, abs, "from the checkout " + abs + " (--vigil-path)", nil
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == VigilModule && released(bi.Main.Version) {
			return bi.Main.Version, "", bi.Main.Version + ", the release this vigil was built from", nil
		}
		for _, dep := range bi.Deps {
			if dep.Path != VigilModule {
				continue
			}
			if dep.Replace != nil && dep.Replace.Version == "" && filepath.IsAbs(dep.Replace.Path) {
				if abs, err := checkVigilCheckout(dep.Replace.Path); err == nil {
					return unpublishedVersion, abs, "from the checkout " + abs + " (the replace this vigil was built with)", nil
				}
			}
			if dep.Replace == nil && released(dep.Version) {
				return dep.Version, "", dep.Version + ", the release this vigil was built from", nil
			}
		}
	}
	if wd, err := os.Getwd(); err == nil {
		if root := enclosingVigilCheckout(wd); root != "" {
			return unpublishedVersion, root, "from the checkout " + root + " (the current folder is in it)", nil
		}
	}
	return "", "", "", errors.New("--vigil-path: vigil has no published release yet, and this vigil was not built from one: expected --vigil-path with a local checkout of vigil, as in `vigil init my-module --vigil-path ~/src/vigil`")
}

func released(v string) bool {
	return v != "" && v != "(devel)" && !module.IsPseudoVersion(v)
}

// checkVigilCheckout returns the absolute path of dir when it holds vigil's
// go.mod.
func checkVigilCheckout(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("--vigil-path %s: expected a checkout of vigil with its go.mod, got: %v", dir, err)
	}
	if got := modfile.ModulePath(data); got != VigilModule {
		return "", fmt.Errorf("--vigil-path %s: expected a checkout of vigil (module %s), but its go.mod is module %q", dir, VigilModule, got)
	}
	return abs, nil
}

// enclosingVigilCheckout is the vigil checkout dir is in, or "".
func enclosingVigilCheckout(dir string) string {
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if modfile.ModulePath(data) == VigilModule {
				return dir
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// scaffoldGoMod is the project's go.mod before go mod tidy: vigil required
// (and replaced), and vigil's command line as a tool, so that `go tool vigil`
// runs the same vigil the module builds with.
func scaffoldGoMod(modPath, version, replace string) ([]byte, error) {
	f := &modfile.File{}
	if err := f.AddModuleStmt(modPath); err != nil {
		return nil, err
	}
	if err := f.AddGoStmt("1.26"); err != nil {
		return nil, err
	}
	f.AddNewRequire(VigilModule, version, false)
	if replace != "" {
		if err := f.AddReplace(VigilModule, "", replace, ""); err != nil {
			return nil, err
		}
	}
	if err := f.AddTool(VigilModule + "/cmd/vigil"); err != nil {
		return nil, err
	}
	return f.Format()
}
