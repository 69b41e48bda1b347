package vigiltest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/vigiltest"
)

// The runner gives a container what the kubelet would: Secret and ConfigMap
// volumes as files at their mount paths (under the pod's root), an emptyDir
// shared by an init container and the container, env from literals, the
// downward API and Secret keys, paths in args rewritten to the pod's root,
// init containers first — and the ServiceAccount's own token.
func TestPodRunsAsAKubeletWould(t *testing.T) {
	ns := env.Namespace(t)
	cs := env.Clientset
	ctx := t.Context()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Data: map[string][]byte{"config.yaml": []byte("policy: strict\n"), "token": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"level": "debug"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sh := "/bin/sh"
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "runner"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "runner",
			Volumes: []corev1.Volume{
				{Name: "defaults", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "defaults"}}},
				{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				{Name: "handoff", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			InitContainers: []corev1.Container{{
				Name: "first", Args: []string{"-c", `echo from-init > "$OUT"`},
				Env:          []corev1.EnvVar{{Name: "OUT", Value: "/var/run/handoff/result"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "handoff", MountPath: "/var/run/handoff"}},
			}},
			Containers: []corev1.Container{{
				Name: "main",
				// A whole arg that is a path under a mount is rewritten ($0
				// here); so is an env value; a path inside a script is not.
				Args: []string{"-c", `cat "$0" "$DIR/config.yaml" "$HANDOFF/result"; echo "pod=$POD_NAME ns=$POD_NAMESPACE token=$TOKEN dir=$DIR"; cat "$KUBECONFIG" > "$HANDOFF/kubeconfig"`, "/etc/settings/level"},
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "defaults"}, Key: "token"}}},
					{Name: "DIR", Value: "/etc/defaults"},
					{Name: "HANDOFF", Value: "/var/run/handoff"},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "defaults", MountPath: "/etc/defaults", ReadOnly: true},
					{Name: "settings", MountPath: "/etc/settings", ReadOnly: true},
					{Name: "handoff", MountPath: "/var/run/handoff"},
				},
			}},
		},
	}
	pod := env.NewPod(t, ns, tmpl, vigiltest.PodOptions{Binary: sh, Name: "runner-1"})
	procs := pod.Start(10 * time.Second)
	procs[0].WaitOK(t, 10*time.Second)
	out := procs[0].Output.String()
	for _, want := range []string{"policy: strict", "debug", "from-init", "pod=runner-1 ns=" + ns + " token=s3cret dir=" + filepath.Join(pod.Root, "etc/defaults")} {
		if !strings.Contains(out, want) {
			t.Errorf("the container's output lacks %q:\n%s", want, out)
		}
	}
	// Its identity is the ServiceAccount's, by a real token.
	kc, err := os.ReadFile(filepath.Join(pod.Root, "var/run/handoff/kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken == "" || cfg.Impersonate.UserName != "" {
		t.Fatalf("the pod's kubeconfig: token %t, impersonating %q; want a token and no impersonation", cfg.BearerToken != "", cfg.Impersonate.UserName)
	}
	who, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("system:serviceaccount:%s:runner", ns); who.Status.UserInfo.Username != want {
		t.Fatalf("the pod's token authenticates as %q; want %q", who.Status.UserInfo.Username, want)
	}
}

// What the kubelet would refuse, the runner refuses: a missing Secret key
// in env, a volume the pod does not have.
func TestPodRefusesWhatAKubeletWould(t *testing.T) {
	ns := env.Namespace(t)
	if _, err := env.Clientset.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := corev1.PodSpec{ServiceAccountName: "runner", Containers: []corev1.Container{{
		Name: "main", Args: []string{"-c", "true"},
		VolumeMounts: []corev1.VolumeMount{{Name: "missing", MountPath: "/etc/x"}},
	}}}
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		env.NewPod(ft, ns, corev1.PodTemplateSpec{Spec: spec}, vigiltest.PodOptions{Binary: "/bin/sh"}).Start(time.Second)
	}()
	if !strings.Contains(ft.fatal, `mounts volume "missing", which the pod does not have`) {
		t.Fatalf("a mount of a volume the pod lacks: %q; want it refused by name", ft.fatal)
	}
	spec.Containers[0].VolumeMounts = nil
	spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k"}}}}
	ft = &fakeT{TB: t}
	pod2 := env.NewPod(ft, ns, corev1.PodTemplateSpec{Spec: spec}, vigiltest.PodOptions{Binary: "/bin/sh"})
	func() {
		defer func() { _ = recover() }()
		pod2.Start(time.Second)
	}()
	if !strings.Contains(ft.fatal, `env X: key "k" of Secret `+ns+`/nope`) || !strings.Contains(ft.fatal, "CreateContainerConfigError") {
		t.Fatalf("env from a missing Secret: %q; want it refused, naming the key and Secret", ft.fatal)
	}
	// An optional one is empty instead.
	spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Optional = ptr.To(true)
	procs := env.NewPod(t, ns, corev1.PodTemplateSpec{Spec: spec}, vigiltest.PodOptions{Binary: "/bin/sh"}).Start(time.Second)
	procs[0].WaitOK(t, 10*time.Second)
}

// fakeT records a Fatalf and stops the goroutine's work by panicking, for
// tests of helpers that fail the test.
type fakeT struct {
	testing.TB
	fatal string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic("fatal")
}

func (f *fakeT) Fatal(args ...any) {
	f.fatal = fmt.Sprint(args...)
	panic("fatal")
}

func (f *fakeT) Helper() {}

// The spec checks: what a container runtime would enforce.
func TestCheckPodSpec(t *testing.T) {
	if got := vigiltest.CheckPodSpec(corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}); len(got) < 5 {
		t.Fatalf("a bare pod spec: %q; want runAsNonRoot, runAsUser, serviceAccountName, readOnlyRootFilesystem, allowPrivilegeEscalation, capabilities named", got)
	}
	ok := corev1.PodSpec{
		ServiceAccountName: "m",
		SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532)},
		Containers: []corev1.Container{{Name: "c", Image: "x", SecurityContext: &corev1.SecurityContext{
			ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}}},
	}
	if got := vigiltest.CheckPodSpec(ok); len(got) != 0 {
		t.Fatalf("a pod spec as vigil's manifests write it: %q; want nothing", got)
	}
}
