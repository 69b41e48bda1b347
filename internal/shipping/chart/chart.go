package chart

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
)

// Options are the chart's settings, from `<module> chart` flags.
type Options struct {
	// Image is the default image reference: repository, then :tag and/or
	// @digest. It becomes image.repository, image.tag and image.digest.
	Image string
	// Kubernetes is the oldest release the chart installs on: the lower
	// bound of its kubeVersion. The module's MinKubernetes when zero; never
	// older. The version of each kind that depends on the cluster
	// (MutatingAdmissionPolicy) is chosen by Helm from what the cluster
	// serves, at install.
	Kubernetes kubeversion.Release
	// AdmissionMemory and WatcherMemory are the defaults of the roles'
	// resources.limits.memory (manifests.Options).
	AdmissionMemory, WatcherMemory string
}

// KubeVersion is the chart's kubeVersion: from the oldest release the chart
// is for up to the newest vigil supports.
func KubeVersion(oldest kubeversion.Release) string {
	return fmt.Sprintf(">=1.%d.0-0 <1.%d.0-0", oldest.Minor, kubeversion.Newest().Minor+1)
}

// oldest is the oldest release the chart of m installs on.
func oldest(m *spec.Module, o Options) (kubeversion.Release, error) {
	min := kubeversion.Oldest()
	if m.MinKubernetes != "" {
		r, err := kubeversion.Parse(m.MinKubernetes)
		if err != nil {
			return r, err
		}
		min = r
	}
	if o.Kubernetes == (kubeversion.Release{}) {
		return min, nil
	}
	if o.Kubernetes.Minor < min.Minor {
		return o.Kubernetes, fmt.Errorf("--kubernetes %s: module %s targets Kubernetes %s or newer (vigil.Options.MinKubernetes): write its chart for %s or a newer release", o.Kubernetes, m.Name, min, min)
	}
	return o.Kubernetes, nil
}

// CertDir is where the admission container reads the serving certificate
// from when the chart mounts it (certificate.mode existingSecret or
// certManager).
const CertDir = "/etc/vigil/tls"

// Certificate modes, the values of certificate.mode.
const (
	CertManaged        = "managed"
	CertExistingSecret = "existingSecret"
	CertManager        = "certManager"
)

// Files returns the chart's files by path inside the chart folder.
func Files(m *spec.Module, o Options) (map[string][]byte, error) {
	repo, tag, digest, err := SplitImage(o.Image)
	if err != nil {
		return nil, err
	}
	if _, err := version.ParseSemantic(Version(m)); err != nil {
		return nil, fmt.Errorf("module %s version %q: a chart's version must be SemVer, as in 1.2.0: set vigil.Options.Version to one", m.Name, m.Version)
	}
	// The definition's fingerprint as Render finds it, for the hooks' Job.
	fp, err := m.Fingerprint()
	if err != nil {
		return nil, err
	}
	from, err := oldest(m, o)
	if err != nil {
		return nil, err
	}
	// The values' ignoredNamespaces: rendered in place of a placeholder
	// namespace the install ignores (ignoredTemplate).
	objs, err := manifests.Render(m, manifests.Options{Image: imageSentinel, Kubernetes: kubeversion.Newest(), IgnoredNamespaces: []string{ignoredSentinel},
		AdmissionMemory: o.AdmissionMemory, WatcherMemory: o.WatcherMemory})
	if err != nil {
		return nil, err
	}
	g := &gen{m: m, subs: map[string]func(string) string{}}
	files := map[string][]byte{}
	var nsLabels map[string]string
	guards := trustGuards(m)
	for i, obj := range objs {
		u, err := toMap(obj)
		if err != nil {
			return nil, err
		}
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		name := manifests.FileName(i, obj)
		switch kind {
		case "CustomResourceDefinition":
			// Shared by every vigil module: Helm installs crds/ when missing
			// and never deletes them.
			data, err := yaml.Marshal(u)
			if err != nil {
				return nil, err
			}
			files["crds/"+strings.TrimPrefix(name, name[:3])] = data
			continue
		case "Namespace":
			if obj.GetName() != m.Namespace {
				break // a trusted namespace: always created
			}
			nsLabels = obj.GetLabels()
		case "ValidatingAdmissionPolicy":
			if guards[obj.GetName()] {
				g.trustGuard(u)
			}
		case "Deployment":
			g.deployment(u, obj.GetLabels()["app.kubernetes.io/component"])
		case "NetworkPolicy":
			g.networkPolicy(u)
		}
		text, err := g.template(u)
		if err == nil {
			text, err = ignoredTemplate(text)
		}
		if err != nil {
			return nil, fmt.Errorf("template of %s %s: %w", kind, obj.GetName(), err)
		}
		switch {
		case kind == "Namespace" && obj.GetName() == m.Namespace:
			text = "{{- if .Values.namespace.create }}\n" + text + "{{- end }}\n"
		case kind == "NetworkPolicy":
			text = "{{- if .Values.networkPolicy.enabled }}\n" + text + "{{- end }}\n"
		case (kind == "MutatingAdmissionPolicy" || kind == "MutatingAdmissionPolicyBinding") && strings.HasPrefix(obj.GetName(), spec.FinalizerPolicyName(m.Name, "")):
			// A Finalize binding's finalizer at admission: where the
			// cluster serves MutatingAdmissionPolicy by default, else the
			// watcher puts it on (registration.FinalizerStamps).
			text = finalizerPolicyIf() + text + "{{- end }}\n"
		case kind == "MutatingAdmissionPolicy" || kind == "MutatingAdmissionPolicyBinding":
			// In the version the cluster serves, chosen at install.
			text = strings.Replace(text, "apiVersion: "+obj.GetObjectKind().GroupVersionKind().GroupVersion().String()+"\n", "apiVersion: {{ include \"vigil.mutatingAdmissionPolicyAPIVersion\" . }}\n", 1)
		}
		files["templates/"+name] = []byte(text)
	}
	hooks, err := hookObjects(m, fp, objs, nsLabels)
	if err != nil {
		return nil, err
	}
	var hookText strings.Builder
	for i, u := range hooks {
		text, err := g.template(u)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			hookText.WriteString("---\n")
		}
		hookText.WriteString(text)
	}
	files["templates/uninstall-hook.yaml"] = []byte(hookText.String())
	monitoring, err := monitoringTemplates(m, objs, nsLabels)
	if err != nil {
		return nil, err
	}
	maps.Copy(files, monitoring)
	g.metrics = metricsServices(objs)
	files["templates/certificate.yaml"] = []byte(certificateTemplate(m, nsLabels))
	files["templates/_helpers.tpl"] = []byte(helpers(m) + trustHelpers + servedHelpers(m))
	files["Chart.yaml"] = chartYAML(m, tag, from)
	values, err := valuesYAML(m, g, repo, tag, digest)
	if err != nil {
		return nil, err
	}
	files["values.yaml"] = values
	schema, err := schemaJSON(m)
	if err != nil {
		return nil, err
	}
	files["values.schema.json"] = schema
	files[".helmignore"] = []byte("*.orig\n*.tmp\n.git/\n")
	return files, nil
}

// Write writes the chart into dir, creating it.
func Write(m *spec.Module, dir string, o Options) error {
	files, err := Files(m, o)
	if err != nil {
		return err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, files[p], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// SplitImage splits an image reference into repository, tag and digest.
func SplitImage(ref string) (repo, tag, digest string, err error) {
	if ref == "" {
		return "", "", "", fmt.Errorf("--image: expected the module's container image, as in --image ghcr.io/acme/module:1.0.0 or ghcr.io/acme/module@sha256:…")
	}
	repo = ref
	if i := strings.Index(repo, "@"); i >= 0 {
		repo, digest = repo[:i], repo[i+1:]
		if !digestRE.MatchString(digest) {
			return "", "", "", fmt.Errorf("--image %q: expected a digest of the form sha256:<64 hex digits> after @, saw %q", ref, digest)
		}
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	if repo == "" {
		return "", "", "", fmt.Errorf("--image %q: expected a repository before the tag or digest", ref)
	}
	return repo, tag, digest, nil
}

var digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// imageSentinel stands for the image in the rendered objects until the
// template expression replaces it.
const imageSentinel = "vigil-chart-image-sentinel"

// ignoredSentinel is the namespace the chart's objects are rendered as
// ignoring, in place of the values' ignoredNamespaces.
const ignoredSentinel = "vigil-chart-ignored-namespaces"

// ignoredItem is a list item of ignoredSentinel: in a namespace selector's
// values.
var ignoredItem = regexp.MustCompile(`(?m)^(\s*)- ` + ignoredSentinel + `\n`)

// ignoredTemplate puts the values' ignoredNamespaces where an object names
// ignoredSentinel: each as a list item, or each quoted in a CEL list (a
// watch's filter, as a Finalize binding's policy matches it). The rendered
// objects name it nowhere else.
func ignoredTemplate(text string) (string, error) {
	text = ignoredItem.ReplaceAllString(text, "${1}{{- range $$.Values.ignoredNamespaces }}\n${1}- {{ . | quote }}\n${1}{{- end }}\n")
	text = strings.ReplaceAll(text, `, "`+ignoredSentinel+`"`, `{{ range $.Values.ignoredNamespaces }}, {{ . | quote }}{{ end }}`)
	text = strings.ReplaceAll(text, `"`+ignoredSentinel+`"`, `{{ range $i, $n := $.Values.ignoredNamespaces }}{{ if $i }}, {{ end }}{{ $n | quote }}{{ end }}`)
	if strings.Contains(text, ignoredSentinel) {
		return "", fmt.Errorf("the values' ignoredNamespaces could not be put in place of %s here", ignoredSentinel)
	}
	return text, nil
}

// gen turns rendered objects into templates: value-driven fields are
// replaced by sentinels in the object, and the sentinels' lines by template
// text once the object is YAML.
type gen struct {
	m    *spec.Module
	subs map[string]func(indent string) string
	n    int
	// defaults of the roles' values, taken from the rendered objects.
	defaults map[string]map[string]any
	// netpol holds the defaults of networkPolicy's values, from the
	// rendered NetworkPolicy; nil when the module has none.
	netpol map[string]any
	// metrics are the Services the ServiceMonitor scrapes.
	metrics []*corev1.Service
}

func (g *gen) sentinel(f func(indent string) string) string {
	g.n++
	s := fmt.Sprintf("__vigil_chart_%d__", g.n)
	g.subs[s] = f
	return s
}

var lineRE = regexp.MustCompile(`^(\s*)(- )?([A-Za-z]+): (__vigil_chart_\d+__)$`)

// template renders u as YAML and replaces its sentinels.
func (g *gen) template(u map[string]any) (string, error) {
	data, err := yaml.Marshal(u)
	if err != nil {
		return "", err
	}
	// Literal text that looks like a template action stays literal.
	text := strings.ReplaceAll(string(data), "{{", `{{ "{{" }}`)
	text = strings.ReplaceAll(text, imageSentinel, `{{ include "vigil.image" $ }}`)
	var out strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		mt := lineRE.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if mt == nil {
			out.WriteString(line)
			continue
		}
		f := g.subs[mt[4]]
		if f == nil {
			return "", fmt.Errorf("unknown sentinel %s", mt[4])
		}
		indent := mt[1]
		if mt[2] != "" {
			indent += "  "
		}
		repl := f(indent)
		if mt[2] != "" {
			if !strings.HasPrefix(repl, indent) || strings.HasPrefix(repl, indent+"{{") {
				return "", fmt.Errorf("sentinel %s starts a list item with a template action", mt[4])
			}
			repl = mt[1] + "- " + repl[len(indent):]
		}
		out.WriteString(repl)
	}
	return out.String(), nil
}

func toMap(o client.Object) (map[string]any, error) {
	data, err := manifests.YAML([]client.Object{o})
	if err != nil {
		return nil, err
	}
	var u map[string]any
	if err := yaml.Unmarshal(data, &u); err != nil {
		return nil, err
	}
	return u, nil
}

// yamlAt renders v as YAML with every line indented.
func yamlAt(v any, indent string) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		panic(err) // values decoded from YAML always encode
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if l != "" {
			b.WriteString(indent + l)
		}
	}
	return b.String()
}

func scalar(s string) string {
	data, _ := yaml.Marshal(s)
	return strings.TrimSuffix(string(data), "\n")
}

// deployment replaces the value-driven fields of one role's Deployment.
func (g *gen) deployment(u map[string]any, role string) {
	if g.defaults == nil {
		g.defaults = map[string]map[string]any{}
	}
	def := map[string]any{}
	g.defaults[role] = def
	v := ".Values." + role
	specm := u["spec"].(map[string]any)
	def["replicas"] = specm["replicas"]
	specm["replicas"] = g.sentinel(func(in string) string {
		return in + "replicas: {{ " + v + ".replicas }}\n"
	})
	pod := specm["template"].(map[string]any)["spec"].(map[string]any)

	def["affinity"] = pod["affinity"]
	for _, f := range []string{"nodeSelector", "tolerations", "affinity"} {
		if _, ok := def[f]; !ok {
			def[f] = map[string]any{}
			if f == "tolerations" {
				def[f] = []any{}
			}
		}
		pod[f] = g.sentinel(func(in string) string {
			return in + "{{- with $" + v + "." + f + " }}\n" +
				in + f + ": {{- toYaml . | nindent " + fmt.Sprint(len(in)+2) + " }}\n" +
				in + "{{- end }}\n"
		})
	}
	def["priorityClassName"] = ""
	pod["priorityClassName"] = g.sentinel(func(in string) string {
		return in + "{{- with $" + v + ".priorityClassName }}\n" +
			in + "priorityClassName: {{ . | quote }}\n" +
			in + "{{- end }}\n"
	})

	volumes, _ := pod["volumes"].([]any)
	pod["volumes"] = g.sentinel(func(in string) string {
		var cert string
		if role == manifests.Admission {
			cert = in + `{{- if ne $.Values.certificate.mode "managed" }}` + "\n" +
				in + "- name: serving-cert\n" +
				in + "  secret:\n" +
				in + `    secretName: {{ include "vigil.certSecret" $ }}` + "\n" +
				in + "{{- end }}\n"
		}
		return listWithExtras(in, "volumes", volumes, cert, "$.Values.extraVolumes")
	})

	for _, key := range []string{"initContainers", "containers"} {
		cs, _ := pod[key].([]any)
		for _, c := range cs {
			g.container(c.(map[string]any), role, key == "containers")
		}
	}
}

// container replaces the value-driven fields of one container; main is the
// role's own container (not a gate's).
func (g *gen) container(c map[string]any, role string, main bool) {
	v := ".Values." + role
	env, _ := c["env"].([]any)
	if main {
		g.defaults[role]["resources"] = c["resources"]
		c["resources"] = g.sentinel(func(in string) string {
			return in + "resources: {{- toYaml " + v + ".resources | nindent " + fmt.Sprint(len(in)+2) + " }}\n"
		})
		for _, e := range env {
			e := e.(map[string]any)
			if e["name"] == "GOMEMLIMIT" {
				e["value"] = "__vigil_gomemlimit__"
			}
		}
	}
	c["env"] = g.sentinel(func(in string) string {
		base := yamlAt(env, in)
		base = strings.ReplaceAll(base, "__vigil_gomemlimit__", `{{ include "vigil.gomemlimit" $`+v+`.resources.limits.memory | quote }}`)
		return in + "env:\n" + base +
			in + "{{- with $.Values.logLevel }}\n" +
			in + "- name: " + EnvLogLevel + "\n" +
			in + "  value: {{ . | quote }}\n" +
			in + "{{- end }}\n" +
			in + "{{- with $.Values.extraEnv }}\n" +
			in + "{{- toYaml . | nindent " + fmt.Sprint(len(in)) + " }}\n" +
			in + "{{- end }}\n"
	})
	mounts, _ := c["volumeMounts"].([]any)
	certMount := main && role == manifests.Admission
	c["volumeMounts"] = g.sentinel(func(in string) string {
		var cert string
		if certMount {
			cert = in + `{{- if ne $.Values.certificate.mode "managed" }}` + "\n" +
				in + "- mountPath: " + CertDir + "\n" +
				in + "  name: serving-cert\n" +
				in + "  readOnly: true\n" +
				in + "{{- end }}\n"
		}
		return listWithExtras(in, "volumeMounts", mounts, cert, "$.Values.extraVolumeMounts")
	})
	args, _ := c["args"].([]any)
	if main {
		c["args"] = g.sentinel(func(in string) string {
			var b strings.Builder
			b.WriteString(in + "args:\n")
			for i := 0; i < len(args); i++ {
				a := fmt.Sprint(args[i])
				if a == "--cert-secret" && i+1 < len(args) && role == manifests.Admission {
					b.WriteString(in + `{{- if eq $.Values.certificate.mode "managed" }}` + "\n")
					b.WriteString(in + "- --cert-secret\n" + in + "- " + scalar(fmt.Sprint(args[i+1])) + "\n")
					b.WriteString(in + "{{- else }}\n")
					b.WriteString(in + "- --cert-dir\n" + in + "- " + CertDir + "\n")
					b.WriteString(in + "{{- end }}\n")
					i++
					continue
				}
				if a == manifests.IgnoreFlag && i+1 < len(args) && fmt.Sprint(args[i+1]) == ignoredSentinel {
					i++ // the values' ignoredNamespaces, below
					continue
				}
				b.WriteString(in + "- " + scalar(a) + "\n")
			}
			// A capability's failure policy reaches the module as a flag,
			// which refuses to weaken a FailClosed() capability.
			b.WriteString(in + "{{- range $capability, $policy := $.Values.failurePolicy }}\n")
			b.WriteString(in + "- --failure-policy\n")
			b.WriteString(in + "- {{ printf \"%s=%s\" $capability $policy | quote }}\n")
			b.WriteString(in + "{{- end }}\n")
			b.WriteString(in + "{{- range $.Values.ignoredNamespaces }}\n")
			b.WriteString(in + "- " + manifests.IgnoreFlag + "\n")
			b.WriteString(in + "- {{ . | quote }}\n")
			b.WriteString(in + "{{- end }}\n")
			return b.String()
		})
	}
}

// listWithExtras is a list field: its rendered items, the conditional
// items given, then the list the values add. A field with no items of its
// own is written only when the values add some.
func listWithExtras(in, key string, items []any, conditional, extras string) string {
	if len(items) == 0 && conditional == "" {
		return in + "{{- with " + extras + " }}\n" +
			in + key + ": {{- toYaml . | nindent " + fmt.Sprint(len(in)) + " }}\n" +
			in + "{{- end }}\n"
	}
	return in + key + ":\n" + yamlAt(items, in) + conditional +
		in + "{{- with " + extras + " }}\n" +
		in + "{{- toYaml . | nindent " + fmt.Sprint(len(in)) + " }}\n" +
		in + "{{- end }}\n"
}

// EnvLogLevel is the environment variable logLevel sets in every container.
const EnvLogLevel = "VIGIL_LOG_LEVEL"
