package informers

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Transform is what the roles' informers do to an object before they cache
// it: its managed fields dropped, and what many objects of a cluster repeat
// held once. A Deployment's hundred Pods share their namespace, labels,
// owner reference and generateName; so do their node's name, images,
// resource requests and limits, tolerations and conditions. Each is
// decoded into its own strings, maps and slices; the transform makes them
// one, so that a cache of every Pod costs what each Pod has of its own.
// Nothing the cache holds is written to (a handler gets a copy; see
// internal/roles/watcher), so sharing is safe.
//
// Strings, and label, annotation, owner, resource and toleration sets, are
// shared through tables that forget everything when one reaches
// tableEntries, so what no object holds any longer costs at most that; a
// string of more than internBytes or a label or annotation set of more
// than tableBytes is never shared. (Package unique would let a string go
// with the last handle to it, and a handle cannot be kept in an object: a
// string would be shared only between two garbage collections.)
//
// It changes its input in place and returns it. An object the cache holds
// already at the same resourceVersion never comes here: the roles'
// informers hand back the one they hold first (Reuse).
func Transform() toolscache.TransformFunc { return (&canon{}).transform }

// transform is Transform's function, with c's tables.
func (c *canon) transform(obj any) (any, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	if o.GetManagedFields() != nil { // as controller-runtime's TransformStripManagedFields: no write when there is none
		o.SetManagedFields(nil)
	}
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return obj, nil // its getters and setters copy: nothing to share
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.meta(o)
	if p, ok := obj.(*corev1.Pod); ok {
		c.pod(p)
	}
	return obj, nil
}

const (
	// tableEntries is how many strings, or sets, a table remembers before
	// it starts over.
	tableEntries = 8192
	// tableBytes is the largest set the table shares, in bytes of keys and
	// values: larger ones are too rare to repeat, and too costly to pin.
	tableBytes = 512
	// internBytes is the longest string interned: longer ones are data.
	internBytes = 128
)

// canon is the tables of shared strings, and label, annotation, owner,
// resource and toleration sets.
// Its methods are called with mu held, once for a whole object.
type canon struct {
	mu          sync.Mutex
	strings     map[string]string
	maps        map[string]map[string]string
	owners      map[string][]metav1.OwnerReference
	resources   map[string]corev1.ResourceList
	tolerations map[string][]corev1.Toleration
}

// intern is s, held once however many objects hold it.
func (c *canon) intern(s string) string {
	if s == "" || len(s) > internBytes {
		return s
	}
	if shared, ok := c.strings[s]; ok {
		return shared
	}
	if c.strings == nil || len(c.strings) >= tableEntries {
		c.strings = map[string]string{}
	}
	c.strings[s] = s
	return s
}

// meta shares what o's metadata repeats of other objects'.
func (c *canon) meta(o metav1.Object) {
	o.SetNamespace(c.intern(o.GetNamespace()))
	o.SetGenerateName(c.intern(o.GetGenerateName()))
	if l := o.GetLabels(); len(l) > 0 {
		o.SetLabels(c.stringMap(l))
	}
	if a := o.GetAnnotations(); len(a) > 0 {
		o.SetAnnotations(c.stringMap(a))
	}
	if refs := o.GetOwnerReferences(); len(refs) > 0 {
		o.SetOwnerReferences(c.ownerRefs(refs))
	}
	if f := o.GetFinalizers(); len(f) > 0 {
		for i := range f {
			f[i] = c.intern(f[i])
		}
	}
}

// stringMap is m, or an equal map another object holds.
func (c *canon) stringMap(m map[string]string) map[string]string {
	size := 0
	keys := make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v)
	}
	if size > tableBytes {
		return m
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size + 2*len(m))
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	key := b.String()
	if shared, ok := c.maps[key]; ok {
		return shared
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[c.intern(k)] = c.intern(v)
	}
	if c.maps == nil || len(c.maps) >= tableEntries {
		c.maps = map[string]map[string]string{}
	}
	c.maps[key] = out
	return out
}

// ownerRefs is refs, or an equal slice another object holds.
func (c *canon) ownerRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var b strings.Builder
	for _, r := range refs {
		b.WriteString(r.APIVersion + "\x00" + r.Kind + "\x00" + r.Name + "\x00" + string(r.UID) + "\x00")
		b.WriteString(boolKey(r.Controller) + boolKey(r.BlockOwnerDeletion))
	}
	key := b.String()
	if shared, ok := c.owners[key]; ok {
		return shared
	}
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = c.intern(refs[i].APIVersion), c.intern(refs[i].Kind)
	}
	if c.owners == nil || len(c.owners) >= tableEntries {
		c.owners = map[string][]metav1.OwnerReference{}
	}
	c.owners[key] = refs
	return refs
}

// resourceList is l, or an equal list another object holds: the requests
// and limits a Deployment's Pods repeat, each a map of Quantities (about
// 800 bytes a Pod of one container at 50,000 Pods, measured).
func (c *canon) resourceList(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		q := l[corev1.ResourceName(name)] // a copy: String caches its text in it, not in l
		b.WriteString(name + "=" + q.String() + "\x00")
	}
	key := b.String()
	if shared, ok := c.resources[key]; ok {
		return shared
	}
	if c.resources == nil || len(c.resources) >= tableEntries {
		c.resources = map[string]corev1.ResourceList{}
	}
	c.resources[key] = l
	return l
}

// tolerationSet is ts, its strings interned, or an equal set another
// object holds: the scheduler's defaults (not-ready and unreachable for 300
// s) on nearly every Pod.
func (c *canon) tolerationSet(ts []corev1.Toleration) []corev1.Toleration {
	if len(ts) == 0 {
		return ts
	}
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Key + "\x00" + string(t.Operator) + "\x00" + t.Value + "\x00" + string(t.Effect) + "\x00")
		if t.TolerationSeconds != nil {
			b.WriteString(strconv.FormatInt(*t.TolerationSeconds, 10))
		}
		b.WriteByte(0)
	}
	key := b.String()
	if shared, ok := c.tolerations[key]; ok {
		return shared
	}
	for i := range ts {
		t := &ts[i]
		t.Key, t.Value = c.intern(t.Key), c.intern(t.Value)
		t.Operator, t.Effect = corev1.TolerationOperator(c.intern(string(t.Operator))), corev1.TaintEffect(c.intern(string(t.Effect)))
		t.TolerationSeconds = sharedInt64(t.TolerationSeconds)
	}
	if c.tolerations == nil || len(c.tolerations) >= tableEntries {
		c.tolerations = map[string][]corev1.Toleration{}
	}
	c.tolerations[key] = ts
	return ts
}

func boolKey(b *bool) string {
	if b == nil {
		return "-"
	}
	return strconv.FormatBool(*b)
}

// pod interns what a cluster's Pods repeat in their spec and status.
func (c *canon) pod(p *corev1.Pod) {
	intern, resources := c.intern, c.resourceList
	s := &p.Spec
	s.NodeName, s.ServiceAccountName, s.DeprecatedServiceAccount = intern(s.NodeName), intern(s.ServiceAccountName), intern(s.DeprecatedServiceAccount)
	s.SchedulerName, s.PriorityClassName = intern(s.SchedulerName), intern(s.PriorityClassName)
	s.RestartPolicy, s.DNSPolicy = corev1.RestartPolicy(intern(string(s.RestartPolicy))), corev1.DNSPolicy(intern(string(s.DNSPolicy)))
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Name, c.Image, c.TerminationMessagePath = intern(c.Name), intern(c.Image), intern(c.TerminationMessagePath)
			c.ImagePullPolicy = corev1.PullPolicy(intern(string(c.ImagePullPolicy)))
			c.Resources.Requests, c.Resources.Limits = resources(c.Resources.Requests), resources(c.Resources.Limits)
			c.TerminationMessagePolicy = corev1.TerminationMessagePolicy(intern(string(c.TerminationMessagePolicy)))
			for j := range c.VolumeMounts {
				c.VolumeMounts[j].MountPath = intern(c.VolumeMounts[j].MountPath)
			}
			for j := range c.Env {
				c.Env[j].Name, c.Env[j].Value = intern(c.Env[j].Name), intern(c.Env[j].Value)
			}
			for j := range c.Ports {
				c.Ports[j].Name, c.Ports[j].Protocol = intern(c.Ports[j].Name), corev1.Protocol(intern(string(c.Ports[j].Protocol)))
			}
			for j := range c.Command {
				c.Command[j] = intern(c.Command[j])
			}
			for j := range c.Args {
				c.Args[j] = intern(c.Args[j])
			}
		}
	}
	for i := range s.Volumes {
		c.volume(&s.Volumes[i].VolumeSource)
	}
	// The small values every Pod points to: its empty security context,
	// grace period, priority, service links and tolerations' seconds.
	if s.SecurityContext != nil && equality.Semantic.DeepEqual(*s.SecurityContext, corev1.PodSecurityContext{}) {
		s.SecurityContext = emptyPodSecurityContext
	}
	s.TerminationGracePeriodSeconds = sharedInt64(s.TerminationGracePeriodSeconds)
	s.EnableServiceLinks = sharedBool(s.EnableServiceLinks)
	if s.Priority != nil && *s.Priority == 0 {
		s.Priority = zeroPriority
	}
	if s.PreemptionPolicy != nil && *s.PreemptionPolicy == corev1.PreemptLowerPriority {
		s.PreemptionPolicy = preemptLowerPriority
	}
	s.Tolerations = c.tolerationSet(s.Tolerations)
	st := &p.Status
	st.Phase, st.QOSClass = corev1.PodPhase(intern(string(st.Phase))), corev1.PodQOSClass(intern(string(st.QOSClass)))
	st.HostIP = intern(st.HostIP)
	for i := range st.HostIPs {
		st.HostIPs[i].IP = intern(st.HostIPs[i].IP)
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Status = corev1.PodConditionType(intern(string(c.Type))), corev1.ConditionStatus(intern(string(c.Status)))
		c.Reason = intern(c.Reason)
	}
	for _, cs := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range cs {
			cs[i].Name, cs[i].Image, cs[i].ImageID = intern(cs[i].Name), intern(cs[i].Image), intern(cs[i].ImageID)
		}
	}
}

// volume interns what the volumes of a cluster's Pods repeat: the sources
// of the service account token volume every Pod has, and those of Secrets
// and ConfigMaps. A volume's own name is often a Pod's (kube-api-access-…),
// and is left.
func (c *canon) volume(v *corev1.VolumeSource) {
	intern := c.intern
	items := func(ks []corev1.KeyToPath) {
		for i := range ks {
			ks[i].Key, ks[i].Path = intern(ks[i].Key), intern(ks[i].Path)
		}
	}
	if v.Secret != nil {
		v.Secret.SecretName = intern(v.Secret.SecretName)
		items(v.Secret.Items)
	}
	if v.ConfigMap != nil {
		v.ConfigMap.Name = intern(v.ConfigMap.Name)
		items(v.ConfigMap.Items)
	}
	if v.Projected == nil {
		return
	}
	for i := range v.Projected.Sources {
		src := &v.Projected.Sources[i]
		if t := src.ServiceAccountToken; t != nil {
			t.Path, t.Audience = intern(t.Path), intern(t.Audience)
		}
		if c := src.ConfigMap; c != nil {
			c.Name = intern(c.Name)
			items(c.Items)
		}
		if c := src.Secret; c != nil {
			c.Name = intern(c.Name)
			items(c.Items)
		}
		if d := src.DownwardAPI; d != nil {
			for j := range d.Items {
				it := &d.Items[j]
				it.Path = intern(it.Path)
				if it.FieldRef != nil {
					it.FieldRef.APIVersion, it.FieldRef.FieldPath = intern(it.FieldRef.APIVersion), intern(it.FieldRef.FieldPath)
				}
			}
		}
	}
}

// The values Pods point to that the transform shares: never written to.
var (
	emptyPodSecurityContext = &corev1.PodSecurityContext{}
	zeroPriority            = new(int32)
	preemptLowerPriority    = ptr.To(corev1.PreemptLowerPriority)
	trueValue, falseValue   = ptr.To(true), ptr.To(false)
	// commonSeconds are the grace periods and toleration seconds the API
	// server defaults Pods to.
	commonSeconds = map[int64]*int64{0: ptr.To[int64](0), 30: ptr.To[int64](30), 300: ptr.To[int64](300)}
)

// sharedBool is p, or a shared pointer to its value.
func sharedBool(p *bool) *bool {
	switch {
	case p == nil:
		return nil
	case *p:
		return trueValue
	}
	return falseValue
}

// sharedInt64 is p, or a shared pointer to its value when it is a common
// one.
func sharedInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	if shared, ok := commonSeconds[*p]; ok {
		return shared
	}
	return p
}
