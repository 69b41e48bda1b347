package define

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Container is a container an Env, a Mount or an RBAC rule is given to: a
// role's main container (Role "admission" or "watcher"), a gate phase's
// init container (Role ""), or every gate phase's (Role GatesRole).
type Container struct {
	Role  string
	Phase int
}

// GatesRole is the Role of the Container that stands for every gate phase.
const GatesRole = "gates"

// Name is the container's name in the module's pods; "gates" for every
// gate phase.
func (c Container) Name() string {
	if c.Role != "" {
		return c.Role
	}
	return spec.InitContainerName(c.Phase)
}

func (c Container) String() string {
	switch c.Role {
	case spec.AdmissionContainer:
		return "Admission"
	case spec.WatcherContainer:
		return "Watcher"
	case GatesRole:
		return "Gates"
	}
	return fmt.Sprintf("Phase(%d)", c.Phase)
}

// expand replaces Gates by the init container of every phase a gate runs
// in, once each.
func expand(cs []Container, gates []*Gate) []Container {
	var out []Container
	add := func(c Container) {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	for _, c := range cs {
		if c.Role != GatesRole {
			add(c)
			continue
		}
		phases := []int{}
		for _, g := range gates {
			phases = append(phases, g.Phase)
		}
		slices.Sort(phases)
		for _, p := range slices.Compact(phases) {
			add(Container{Phase: p})
		}
	}
	return out
}

// targets are the containers a declaration names with For.
type targets struct {
	containers []Container
	forSite    string // where For was called; empty until then
}

// setFor records the containers For names.
func (t *targets) setFor(what, site string, cs []Container) error {
	if t.forSite != "" {
		return fmt.Errorf("%s: For again, after For at %s: name every container in one For", what, t.forSite)
	}
	t.forSite = site
	if len(cs) == 0 {
		return fmt.Errorf("%s: For(): expected at least one container, such as vigil.Admission, vigil.Watcher or vigil.Phase(1)", what)
	}
	for _, c := range cs {
		switch {
		case c.Role != "" && c.Role != spec.AdmissionContainer && c.Role != spec.WatcherContainer && c.Role != GatesRole:
			return fmt.Errorf("%s: For: container role %q: expected vigil.Admission, vigil.Watcher, vigil.Gates or vigil.Phase(n)", what, c.Role)
		case c.Role == "" && c.Phase < 0:
			return fmt.Errorf("%s: For(%s): expected a phase of 0 or more", what, c)
		}
		if !slices.Contains(t.containers, c) {
			t.containers = append(t.containers, c)
		}
	}
	return nil
}

// Env is an environment variable as it is declared.
type Env struct {
	Site string
	Name string
	// value is the literal; from the key; how names the method that set
	// either, and where.
	value        string
	from         *spec.KeyRef
	how, howSite string
	optional     bool
	targets
}

var cIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are the variables vigil sets in every container.
var reservedEnv = []string{"POD_NAME", "POD_NAMESPACE", "POD_UID", "GOMEMLIMIT", "KUBECONFIG"}

// NewEnv starts the declaration of the variable name at site.
func NewEnv(name, site string) (*Env, error) {
	e := &Env{Name: name, Site: site}
	switch {
	case !cIdentifier.MatchString(name):
		return e, fmt.Errorf("Env(%q): expected a variable name of letters, digits and '_', not starting with a digit, such as LOG_FORMAT", name)
	case slices.Contains(reservedEnv, name) || strings.HasPrefix(name, "VIGIL_"):
		return e, fmt.Errorf("Env(%q): vigil sets this variable itself (it sets %s and every VIGIL_ one): choose another name", name, strings.Join(reservedEnv, ", "))
	}
	return e, nil
}

func (e *Env) what() string { return fmt.Sprintf("Env(%q)", e.Name) }

func (e *Env) set(how, site string) error {
	if e.how != "" {
		return fmt.Errorf("%s: %s after %s at %s: a variable has one value; declare it once", e.what(), how, e.how, e.howSite)
	}
	e.how, e.howSite = how, site
	return nil
}

// SetValue gives the variable a literal value.
func (e *Env) SetValue(v, site string) error {
	if err := e.set("Value", site); err != nil {
		return err
	}
	e.value = v
	return nil
}

// SetFrom takes the variable's value from a key of a Secret or ConfigMap.
func (e *Env) SetFrom(kind, name, key, site string) error {
	how := "From" + kind
	if err := e.set(how, site); err != nil {
		return err
	}
	if err := checkObject(kind, name); err != nil {
		return fmt.Errorf("%s: %s(%q, %q): %v", e.what(), how, name, key, err)
	}
	if problems := validation.IsConfigMapKey(key); len(problems) > 0 {
		return fmt.Errorf("%s: %s(%q, %q): key %q: %s", e.what(), how, name, key, key, strings.Join(problems, "; "))
	}
	e.from = &spec.KeyRef{Kind: kind, Name: name, Key: key}
	return nil
}

// SetOptional leaves the variable unset when its key is missing.
func (e *Env) SetOptional() { e.optional = true }

// For gives the variable to the containers.
func (e *Env) For(site string, cs []Container) error { return e.setFor(e.what(), site, cs) }

// Mount is a Secret or ConfigMap volume as it is declared.
type Mount struct {
	Site     string
	Kind     string
	Name     string
	Path     string
	Keys     []string
	Optional bool
	targets
}

// LocalPath is the folder the process finds the volume's files in: the
// mount path, or under `vigil dev` the same path under VIGIL_MOUNT_ROOT.
func (mt *Mount) LocalPath() string {
	return filepath.FromSlash(spec.Mount{Path: mt.Path}.LocalPath(os.Getenv(spec.EnvMountRoot)))
}

// vigilPaths are the folders vigil mounts in its own containers: the
// handoff folder and the serving certificate's.
var vigilPaths = []string{"/var/run/vigil", "/etc/vigil"}

// NewMount starts the declaration of a volume of the Secret or ConfigMap
// name at path, declared at site.
func NewMount(kind, name, p, site string) (*Mount, error) {
	mt := &Mount{Kind: kind, Name: name, Path: p, Site: site}
	what := fmt.Sprintf("Mount%s(%q, %q)", kind, name, p)
	if err := checkObject(kind, name); err != nil {
		return mt, fmt.Errorf("%s: %v", what, err)
	}
	switch {
	case !path.IsAbs(p) || path.Clean(p) != p:
		return mt, fmt.Errorf("%s: expected an absolute, clean mount path such as /etc/%s, got %q", what, name, p)
	case p == "/" || strings.Contains(p, ":"):
		return mt, fmt.Errorf("%s: %q cannot be a mount path: give a folder of its own, such as /etc/%s", what, p, name)
	}
	for _, own := range vigilPaths {
		if nested(p, own) {
			return mt, fmt.Errorf("%s: %s would overlap vigil's own mount %s: choose another folder, such as /etc/%s", what, p, own, name)
		}
	}
	return mt, nil
}

// nested reports whether one of the paths is the other or under it.
func nested(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

func (mt *Mount) what() string { return fmt.Sprintf("Mount%s(%q, %q)", mt.Kind, mt.Name, mt.Path) }

// SetKeys mounts only these keys, one file each.
func (mt *Mount) SetKeys(keys []string) error {
	if len(keys) == 0 {
		return fmt.Errorf("%s: Keys(): expected at least one key; leave Keys out to mount every key", mt.what())
	}
	for _, k := range keys {
		if problems := validation.IsConfigMapKey(k); len(problems) > 0 {
			return fmt.Errorf("%s: Keys(%q): %s", mt.what(), k, strings.Join(problems, "; "))
		}
		if !slices.Contains(mt.Keys, k) {
			mt.Keys = append(mt.Keys, k)
		}
	}
	return nil
}

// For mounts the volume in the containers.
func (mt *Mount) For(site string, cs []Container) error { return mt.setFor(mt.what(), site, cs) }

func checkObject(kind, name string) error {
	if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
		return fmt.Errorf("%s name %q: expected lower-case letters, digits, '-' and '.': %s", kind, name, strings.Join(problems, "; "))
	}
	return nil
}

// validateConfig reports the mistakes only the whole definition shows: a
// declaration without For or a value, a phase without gates, a variable
// twice in a container, two mounts at one path of a container.
func validateConfig(envs []*Env, mounts []*Mount, gates []*Gate) []error {
	var errs []error
	phases := map[int]bool{}
	for _, g := range gates {
		phases[g.Phase] = true
	}
	checkTargets := func(site, what string, t targets) {
		if t.forSite == "" {
			errs = append(errs, fmt.Errorf("%s: %s names no container: end it with For(vigil.Admission, vigil.Watcher, vigil.Phase(n)...)", site, what))
		}
		for _, c := range t.containers {
			if c.Role == GatesRole && len(gates) == 0 {
				errs = append(errs, fmt.Errorf("%s: %s: For(Gates): the module has no gates, so there is no gate phase", t.forSite, what))
			}
			if c.Role == "" && !phases[c.Phase] {
				have := make([]string, 0, len(phases))
				for _, g := range gates {
					if s := fmt.Sprint(g.Phase); !slices.Contains(have, s) {
						have = append(have, s)
					}
				}
				slices.Sort(have)
				in := "the module has no gates"
				if len(have) > 0 {
					in = "its gates run in phase " + strings.Join(have, ", ")
				}
				errs = append(errs, fmt.Errorf("%s: %s: For(%s): no gate runs in phase %d, so there is no such init container (%s)", t.forSite, what, c, c.Phase, in))
			}
		}
	}
	envAt := map[[2]string]string{} // container, name → site
	for _, e := range envs {
		checkTargets(e.Site, e.what(), e.targets)
		if e.how == "" {
			errs = append(errs, fmt.Errorf("%s: %s has no value: give it one with Value, FromSecret or FromConfigMap", e.Site, e.what()))
		}
		if e.optional && e.from == nil && e.how != "" {
			errs = append(errs, fmt.Errorf("%s: %s is Optional, but its value is a literal: only a key of a Secret or ConfigMap can be missing; drop Optional", e.Site, e.what()))
		}
		for _, c := range expand(e.containers, gates) {
			k := [2]string{c.Name(), e.Name}
			if other, ok := envAt[k]; ok {
				errs = append(errs, fmt.Errorf("%s: %s is already given to container %s by the declaration at %s: declare each variable of a container once", e.Site, e.what(), c.Name(), other))
				continue
			}
			envAt[k] = e.Site
		}
	}
	type at struct{ path, site string }
	mountsAt := map[string][]at{} // container → its mounts
	for _, mt := range mounts {
		checkTargets(mt.Site, mt.what(), mt.targets)
		for _, c := range expand(mt.containers, gates) {
			for _, o := range mountsAt[c.Name()] {
				if nested(o.path, mt.Path) {
					errs = append(errs, fmt.Errorf("%s: %s overlaps, in container %s, the mount at %s declared at %s: give each volume a folder of its own", mt.Site, mt.what(), c.Name(), o.path, o.site))
				}
			}
			mountsAt[c.Name()] = append(mountsAt[c.Name()], at{mt.Path, mt.Site})
		}
	}
	return errs
}

// unrun finds the variables and volumes none of whose containers the module
// runs: For(vigil.Watcher) in a module without a watcher role.
func unrun(m *spec.Module) []error {
	run := map[string]bool{}
	if m.HasAdmission() {
		for _, c := range m.PodContainers(spec.AdmissionContainer) {
			run[c] = true
		}
	}
	if m.HasWatcher() {
		run[spec.WatcherContainer] = true
	}
	// A phase without gates is reported already, naming For's call.
	roles := func(cs []string) bool {
		return slices.ContainsFunc(cs, func(c string) bool { return run[c] || strings.HasPrefix(c, "gate-phase-") })
	}
	var errs []error
	const why = "the module runs an admission pod when it has gates or admission bindings, a watcher when it has watches, schedules or audited validations"
	for _, e := range m.Env {
		if len(e.Containers) > 0 && !roles(e.Containers) {
			errs = append(errs, fmt.Errorf("%s: Env(%q): the module runs none of its containers (%s): %s", e.Site, e.Name, strings.Join(e.Containers, ", "), why))
		}
	}
	for _, mt := range m.Mounts {
		if len(mt.Containers) > 0 && !roles(mt.Containers) {
			errs = append(errs, fmt.Errorf("%s: Mount%s(%q, %q): the module runs none of its containers (%s): %s", mt.Site, mt.Kind, mt.Name, mt.Path, strings.Join(mt.Containers, ", "), why))
		}
	}
	return errs
}

// resolveConfig turns the declarations into the spec's variables and
// volumes, each volume named after its object (with its place among the
// volumes when that name is taken or too long).
func resolveConfig(envs []*Env, mounts []*Mount, gates []*Gate) ([]spec.Env, []spec.Mount) {
	var outEnv []spec.Env
	for _, e := range envs {
		se := spec.Env{Name: e.Name, Value: e.value, Containers: containerNames(expand(e.containers, gates)), Site: e.Site}
		if e.from != nil {
			from := *e.from
			from.Optional = e.optional
			se.From = &from
		}
		outEnv = append(outEnv, se)
	}
	var outMounts []spec.Mount
	used := map[string]bool{"handoff": true}
	for i, mt := range mounts {
		vol := strings.ToLower(mt.Kind) + "-" + mt.Name
		if len(vol) > validation.DNS1123LabelMaxLength || strings.Contains(mt.Name, ".") || used[vol] {
			vol = fmt.Sprintf("%s-%d", strings.ToLower(mt.Kind), i)
		}
		used[vol] = true
		outMounts = append(outMounts, spec.Mount{
			Volume: vol, Kind: mt.Kind, Name: mt.Name, Path: mt.Path, Keys: mt.Keys, Optional: mt.Optional,
			Containers: containerNames(expand(mt.containers, gates)), Site: mt.Site,
		})
	}
	return outEnv, outMounts
}

func containerNames(cs []Container) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Name())
	}
	return out
}
