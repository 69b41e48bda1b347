package define

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// envName is what a container's variable may be named, as a setting's.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Setting resolves the setting name — its variable's value where the
// definition is resolved, else def — and records it, declared at site.
func (m *Module) Setting(site, name, def string) string {
	value, ok := os.LookupEnv(name)
	if !ok {
		value = def
	}
	switch {
	case !envName.MatchString(name):
		m.Recordf(site, "Setting(%q): expected an environment variable's name, as in SHOP_MAX_REPLICAS", name)
		return value
	case strings.HasPrefix(name, "VIGIL_"):
		m.Recordf(site, "Setting(%q): names starting with VIGIL_ are vigil's own: choose another prefix, as the module's name", name)
		return value
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.settings {
		if s.Name == name {
			if s.Default != def {
				m.errs = append(m.errs, fmt.Errorf("%s: Setting(%q, %q): declared at %s with the default %q: one setting has one default", site, name, def, s.Site, s.Default))
			}
			return value
		}
	}
	m.settings = append(m.settings, spec.Setting{Name: name, Value: value, Default: def, Site: site})
	return value
}

// SettingAs is Setting with its value parsed by parse: a value parse
// refuses, the default's or the environment's, is a mistake recorded at
// site, and the default stands.
func SettingAs[T any](m *Module, site, name, def string, parse func(string) (T, error)) T {
	value := m.Setting(site, name, def)
	v, err := parse(value)
	if err != nil {
		if value == def {
			m.Recordf(site, "Setting(%q): the default %q does not parse: %v: declare a default that does", name, def, err)
		} else {
			m.Recordf(site, "Setting(%q): %s=%q does not parse: %v: set a value that does, or unset it for the default %q", name, name, value, err, def)
		}
		v, _ = parse(def)
	}
	return v
}
