package podrun

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// objects is a Source of Secrets and ConfigMaps held in memory.
type objects struct {
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
}

func (o objects) Secret(_ context.Context, name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (o objects) ConfigMap(_ context.Context, name string) (*corev1.ConfigMap, error) {
	if cm, ok := o.configMaps[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

var src = objects{
	secrets: map[string]*corev1.Secret{
		"api": {ObjectMeta: metav1.ObjectMeta{Name: "api"}, Data: map[string][]byte{"token": []byte("s3cret"), "user": []byte("u")}},
	},
	configMaps: map[string]*corev1.ConfigMap{
		"cluster": {ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Data: map[string]string{"region": "eu-1", "zone": "a"},
			BinaryData: map[string][]byte{"blob": {0, 1}}},
	},
}

func secretKey(name, key string, optional bool) *corev1.EnvVarSource {
	s := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	if optional {
		s.Optional = ptr.To(true)
	}
	return &corev1.EnvVarSource{SecretKeyRef: s}
}

func configMapKey(name, key string, optional bool) *corev1.EnvVarSource {
	s := &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	if optional {
		s.Optional = ptr.To(true)
	}
	return &corev1.EnvVarSource{ConfigMapKeyRef: s}
}

func field(path string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
}

func podOf(c corev1.Container, volumes ...corev1.Volume) *Pod {
	return &Pod{
		Spec: corev1.PodSpec{ServiceAccountName: "m-admission", Containers: []corev1.Container{c}, Volumes: volumes},
		Name: "m-abc", Namespace: "ns", UID: "u-1", Labels: map[string]string{"app.kubernetes.io/name": "m"},
		Annotations: map[string]string{"note": "n"}, NodeName: "node-1", IP: "127.0.0.1",
	}
}

// The environment is the kubelet's: envFrom first, in key order, then env
// in order; keys read from the Source, the downward API from the pod, and
// an optional key that is missing left out.
func TestEnvResolvesAsAKubeletWould(t *testing.T) {
	pod := podOf(corev1.Container{
		Name: "admission",
		EnvFrom: []corev1.EnvFromSource{
			{Prefix: "C_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cluster"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr.To(true)}},
		},
		Env: []corev1.EnvVar{
			{Name: "LOG", Value: "json"},
			{Name: "TOKEN", ValueFrom: secretKey("api", "token", false)},
			{Name: "REGION", ValueFrom: configMapKey("cluster", "region", false)},
			{Name: "NOPE", ValueFrom: secretKey("api", "nope", true)},
			{Name: "GONE", ValueFrom: configMapKey("gone", "k", true)},
			{Name: "POD_NAME", ValueFrom: field("metadata.name")},
			{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
			{Name: "POD_UID", ValueFrom: field("metadata.uid")},
			{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
			{Name: "NODE", ValueFrom: field("spec.nodeName")},
			{Name: "IP", ValueFrom: field("status.podIP")},
			{Name: "APP", ValueFrom: field("metadata.labels['app.kubernetes.io/name']")},
			{Name: "NOTE", ValueFrom: field("metadata.annotations['note']")},
		},
	})
	got, err := pod.Env(t.Context(), src, "admission")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"C_region=eu-1", "C_zone=a", "LOG=json", "TOKEN=s3cret", "REGION=eu-1",
		"POD_NAME=m-abc", "POD_NAMESPACE=ns", "POD_UID=u-1", "SA=m-admission", "NODE=node-1", "IP=127.0.0.1", "APP=m", "NOTE=n"}
	if !slices.Equal(got, want) {
		t.Fatalf("Env:\n got %q\nwant %q", got, want)
	}
}

// A required key or object that is missing fails the container, naming the
// variable, the key and the object; so does a field the runner cannot give.
func TestEnvRefusesWhatAKubeletWould(t *testing.T) {
	for _, tc := range []struct {
		e    corev1.EnvVar
		from *corev1.EnvFromSource
		want string
	}{
		{e: corev1.EnvVar{Name: "X", ValueFrom: secretKey("api", "nope", false)}, want: `env X: key "nope" of Secret ns/api: no such key`},
		{e: corev1.EnvVar{Name: "X", ValueFrom: secretKey("gone", "k", false)}, want: `env X: key "k" of Secret ns/gone: secrets "gone" not found`},
		{e: corev1.EnvVar{Name: "X", ValueFrom: configMapKey("cluster", "blob", false)}, want: `env X: key "blob" of ConfigMap ns/cluster: no such key`},
		{e: corev1.EnvVar{Name: "X", ValueFrom: configMapKey("gone", "k", false)}, want: `env X: key "k" of ConfigMap ns/gone: configmaps "gone" not found`},
		{e: corev1.EnvVar{Name: "X", ValueFrom: field("spec.hostname")}, want: "env X: fieldRef spec.hostname: the runner does not resolve it"},
		{e: corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}}, want: "resourceFieldRef limits.memory"},
		{from: &corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}, want: "envFrom Secret ns/gone"},
		{from: &corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}, want: "envFrom ConfigMap ns/gone"},
	} {
		c := corev1.Container{Name: "admission"}
		if tc.from != nil {
			c.EnvFrom = []corev1.EnvFromSource{*tc.from}
		} else {
			c.Env = []corev1.EnvVar{tc.e}
		}
		_, err := podOf(c).Env(t.Context(), src, "admission")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Env of %+v: %v, want an error with %q", c, err, tc.want)
		}
	}
	if _, err := podOf(corev1.Container{Name: "admission"}).Env(t.Context(), src, "watcher"); err == nil {
		t.Error("Env of a container the pod does not have: no error")
	}
}

func secretVolume(name, secret string, optional bool, keys ...string) corev1.Volume {
	v := &corev1.SecretVolumeSource{SecretName: secret}
	for _, k := range keys {
		v.Items = append(v.Items, corev1.KeyToPath{Key: k, Path: "sub/" + k})
	}
	if optional {
		v.Optional = ptr.To(true)
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: v}}
}

func configMapVolume(name, cm string, optional bool) corev1.Volume {
	v := &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}
	if optional {
		v.Optional = ptr.To(true)
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: v}}
}

// files lists the regular files under root, by path relative to it.
func files(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The volumes the container mounts are written under the root at their
// mount paths: every key, or the items at their paths, an emptyDir and an
// optional missing object as empty folders, with the mode asked for; a
// volume it does not mount is not written.
func TestMountWritesTheContainersVolumes(t *testing.T) {
	pod := podOf(corev1.Container{Name: "admission", VolumeMounts: []corev1.VolumeMount{
		{Name: "all", MountPath: "/etc/api"},
		{Name: "picked", MountPath: "/etc/picked/"},
		{Name: "cluster", MountPath: "/etc/cluster"},
		{Name: "maybe", MountPath: "/etc/maybe"},
		{Name: "scratch", MountPath: "/var/run/vigil"},
	}},
		secretVolume("all", "api", false),
		secretVolume("picked", "api", true, "token", "absent"),
		configMapVolume("cluster", "cluster", false),
		configMapVolume("maybe", "gone", true),
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		secretVolume("unmounted", "api", false),
	)
	root := t.TempDir()
	if err := pod.Mount(t.Context(), src, "admission", root, 0o600); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"etc/api/token": "s3cret", "etc/api/user": "u",
		"etc/picked/sub/token": "s3cret",
		"etc/cluster/region":   "eu-1", "etc/cluster/zone": "a", "etc/cluster/blob": "\x00\x01",
	}
	got := files(t, root)
	if len(got) != len(want) {
		t.Errorf("files under the root: %q, want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("file %s = %q, want %q", k, got[k], v)
		}
	}
	for _, dir := range []string{"etc/maybe", "var/run/vigil"} {
		if st, err := os.Stat(filepath.Join(root, dir)); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want an empty folder of mode 0700", dir, st, err)
		}
	}
	if st, err := os.Stat(filepath.Join(root, "etc/api/token")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("a key's file: %v, %v; want mode 0600", st, err)
	}
	// An emptyDir keeps what an earlier container left in it.
	if err := os.WriteFile(filepath.Join(root, "var/run/vigil/result"), []byte("r"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := pod.Mount(t.Context(), src, "admission", root, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := files(t, root)["var/run/vigil/result"]; got != "r" {
		t.Errorf("an emptyDir's file after a second mount: %q, want it kept", got)
	}
	if st, err := os.Stat(filepath.Join(root, "etc/cluster/zone")); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("a key's file mounted with 0644: %v, %v", st, err)
	}
}

// What keeps a kubelet's pod in ContainerCreating fails the mount, naming
// the volume; so does what the runner does not emulate.
func TestMountRefusesWhatAKubeletWould(t *testing.T) {
	for _, tc := range []struct {
		mount corev1.VolumeMount
		vol   corev1.Volume
		want  string
	}{
		{corev1.VolumeMount{Name: "x", MountPath: "/x"}, secretVolume("other", "api", false), `container admission mounts volume "x", which the pod does not have`},
		{corev1.VolumeMount{Name: "x", MountPath: "/x"}, secretVolume("x", "gone", false), `volume x: Secret ns/gone: secrets "gone" not found (the kubelet would keep the pod in ContainerCreating)`},
		{corev1.VolumeMount{Name: "x", MountPath: "/x"}, configMapVolume("x", "gone", false), `volume x: ConfigMap ns/gone: configmaps "gone" not found`},
		{corev1.VolumeMount{Name: "x", MountPath: "/x"}, secretVolume("x", "api", false, "absent"), `volume x: key "absent" missing`},
		{corev1.VolumeMount{Name: "x", MountPath: "/x", SubPath: "a"}, secretVolume("x", "api", false), "volume x: subPath mounts are not emulated"},
		{corev1.VolumeMount{Name: "x", MountPath: "/x"}, corev1.Volume{Name: "x", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}, "volume x: the runner emulates Secret, ConfigMap and emptyDir volumes only"},
	} {
		pod := podOf(corev1.Container{Name: "admission", VolumeMounts: []corev1.VolumeMount{tc.mount}}, tc.vol)
		err := pod.Mount(t.Context(), src, "admission", t.TempDir(), 0o644)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Mount of %+v: %v, want an error with %q", tc.vol, err, tc.want)
		}
	}
}

// The args are the command's after its first word, then the args; a path
// under a mount, whole or as a --flag=value's value, is the same path under
// the root.
func TestArgsAndLocalPaths(t *testing.T) {
	c := corev1.Container{Name: "admission", Command: []string{"/module", "admission"}, Args: []string{"--cert-dir=/etc/certs/tls", "/etc/certs", "/etc/certsx", "--addr", ":9443"},
		VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/etc/certs/"}, {Name: "etc", MountPath: "/etc/certs/tls"}}}
	if got, want := Args(c), []string{"admission", "--cert-dir=/etc/certs/tls", "/etc/certs", "/etc/certsx", "--addr", ":9443"}; !slices.Equal(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
	if got := Args(corev1.Container{Args: []string{"watcher"}}); !slices.Equal(got, []string{"watcher"}) {
		t.Errorf("Args without a command = %q, want the args", got)
	}
	var local []string
	for _, a := range Args(c) {
		local = append(local, LocalArg(c, "/tmp/root", a))
	}
	want := []string{"admission", "--cert-dir=/tmp/root/etc/certs/tls", "/tmp/root/etc/certs", "/etc/certsx", "--addr", ":9443"}
	if !slices.Equal(local, want) {
		t.Errorf("LocalArg = %q, want %q", local, want)
	}
	if ms := Mounts(c); ms[0].Name != "etc" {
		t.Errorf("Mounts = %v, want the longest path first", ms)
	}
}
