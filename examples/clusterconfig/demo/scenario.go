package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/dev"
)

// options configure a run of the demo.
type options struct {
	kubeconfig string // empty: an embedded control plane
	dir        string // the clusterconfig example
	out        io.Writer
	progress   io.Writer
	color      bool
}

// report is what the demo saw, step by step, for its summary and its test.
type report struct {
	Steps  []step
	Events []dev.Event
	// Waiting is what the gates said while nothing was installed.
	Waiting []dev.Event
	// Applied is when the CRDs, the ClusterConfig and the Exemption went in.
	Applied time.Time
	// PhasesDone lists the phases in the order they finished.
	PhasesDone []int
	Enforced   time.Time
	PodLabel   string
	Denial     string
	// Exempted is the admission of the privileged pod once exempted.
	Exempted *dev.Review
	Status   map[string]any
	Took     time.Duration
}

type step struct {
	Name   string
	Took   time.Duration
	Detail string
}

const (
	demoNS      = "demo"
	exemptionNS = "uds-policy-exemptions"
	label       = "uds.dev/cluster"
)

type demo struct {
	o       options
	rep     *report
	session *dev.Session
	c       client.Client
	printer *dev.Printer

	mu     sync.Mutex
	events chan dev.Event
}

// runDemo runs the scenario; the error names the step that failed.
func runDemo(ctx context.Context, o options) (*report, error) {
	began := time.Now()
	d := &demo{o: o, rep: &report{}, events: make(chan dev.Event, 4096),
		printer: &dev.Printer{Out: o.out, Color: o.color, Start: began}}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		if d.session != nil {
			_ = d.session.Wait()
		}
	}()
	d.say(d.bold("vigil demo: the clusterconfig module, from an empty cluster to admission, on a real API server"))
	steps := []struct {
		name string
		run  func(context.Context) (string, error)
	}{
		{"start the module with nothing installed: its gates wait", d.start},
		{"a few seconds later, apply the CRDs, the ClusterConfig and an Exemption", d.apply},
		{"the gate phases pass, in order", d.phases},
		{"the webhooks register, only now", d.registered},
		{"create a Pod: mutated with the cluster's label", d.createPod},
		{"create a privileged Pod: denied", d.privilegedDenied},
		{"add an Exemption and retry: admitted", d.exempted},
		{"the watcher keeps the ClusterConfig's status", d.status},
	}
	for i, s := range steps {
		d.say("")
		d.say(d.bold(fmt.Sprintf("==> %d. %s", i+1, s.name)))
		t := time.Now()
		detail, err := s.run(ctx)
		if err != nil {
			return d.rep, fmt.Errorf("step %d (%s) failed: %w", i+1, s.name, err)
		}
		d.rep.Steps = append(d.rep.Steps, step{Name: s.name, Took: time.Since(t), Detail: detail})
		d.say(d.green("    ✓ " + detail))
	}
	cancel()
	if err := d.session.Wait(); err != nil {
		return d.rep, fmt.Errorf("stop the module: %w", err)
	}
	d.rep.Took = time.Since(began)
	d.say("")
	d.say(d.bold(fmt.Sprintf("==> summary: %d steps passed in %s", len(d.rep.Steps), d.rep.Took.Round(100*time.Millisecond))))
	for i, s := range d.rep.Steps {
		d.say(fmt.Sprintf("    %d. %-72s %6.1fs", i+1, s.Name, s.Took.Seconds()))
	}
	d.say("    Run it yourself: go run ./cmd/vigil dev ./examples/clusterconfig")
	return d.rep, nil
}

func (d *demo) say(s string) { fmt.Fprintln(d.o.out, s) }

func (d *demo) bold(s string) string  { return d.paint("\x1b[1m", s) }
func (d *demo) green(s string) string { return d.paint("\x1b[32m", s) }
func (d *demo) paint(code, s string) string {
	if !d.o.color {
		return s
	}
	return code + s + "\x1b[0m"
}

func (d *demo) onEvent(e dev.Event) {
	d.printer.Print(e)
	d.mu.Lock()
	d.rep.Events = append(d.rep.Events, e)
	d.mu.Unlock()
	select {
	case d.events <- e:
	default: // nobody is waiting for that many
	}
}

// await reads events until one satisfies ok.
func (d *demo) await(ctx context.Context, within time.Duration, what string, ok func(dev.Event) bool) (dev.Event, error) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case e := <-d.events:
			if ok(e) {
				return e, nil
			}
			if e.Kind == dev.Stopped {
				return e, fmt.Errorf("the module stopped while waiting for %s", what)
			}
		case <-timer.C:
			return dev.Event{}, fmt.Errorf("no %s within %s", what, within)
		case <-ctx.Done():
			return dev.Event{}, ctx.Err()
		}
	}
}

func (d *demo) start(ctx context.Context) (string, error) {
	s, err := dev.Start(ctx, dev.Options{
		Path: d.o.dir, Kubeconfig: d.o.kubeconfig, Progress: d.o.progress, OnEvent: d.onEvent,
	})
	if err != nil {
		return "", err
	}
	d.session = s
	if d.c, err = client.New(s.Config, client.Options{}); err != nil {
		return "", err
	}
	// The defaults Secret is the platform's, "guaranteed to exist at pod
	// startup": the module's pods mount it and do not start without it.
	defaults, err := os.ReadFile(filepath.Join(d.o.dir, "defaults.yaml"))
	if err != nil {
		return "", err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: "uds-core-defaults"}, Data: map[string][]byte{"defaults.yaml": defaults}}
	if err := d.c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create the defaults Secret: %w", err)
	}
	d.say("    the platform's Secret " + s.Namespace + "/uds-core-defaults is in place, as the module's pods need it to start")
	e, err := d.await(ctx, 30*time.Second, "report of a waiting gate in phase 0", func(e dev.Event) bool {
		return e.Kind == dev.GateWaiting && e.Phase == 0 && e.Seen != ""
	})
	if err != nil {
		return "", err
	}
	d.rep.Waiting = append(d.rep.Waiting, e)
	return fmt.Sprintf("gate %s is waiting; it last saw: %s", e.Gate, e.Seen), nil
}

func (d *demo) apply(ctx context.Context) (string, error) {
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	for _, e := range d.snapshot() {
		if e.Kind == dev.PhaseDone {
			return "", fmt.Errorf("phase %d finished before anything was installed", e.Phase)
		}
	}
	for _, ns := range []string{demoNS, exemptionNS} {
		if err := d.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	var applied []string
	for _, file := range []string{"crds.yaml", "clusterconfig.yaml", "exemption.yaml"} {
		objs, err := readObjects(filepath.Join(d.o.dir, file))
		if err != nil {
			return "", err
		}
		for _, obj := range objs {
			if err := d.create(ctx, obj); err != nil {
				return "", err
			}
			applied = append(applied, describe(obj))
			d.say("    applied " + describe(obj))
		}
	}
	d.rep.Applied = time.Now()
	return fmt.Sprintf("%d objects applied", len(applied)), nil
}

// create creates obj, retrying while its kind is not served yet (a CRD just
// created is not at once).
func (d *demo) create(ctx context.Context, obj client.Object) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = d.c.Create(ctx, obj)
		switch {
		case last == nil, apierrors.IsAlreadyExists(last):
			return true, nil
		case meta.IsNoMatchError(last), apierrors.IsNotFound(last):
			return false, nil
		default:
			return false, last
		}
	})
	if err != nil {
		return fmt.Errorf("create %s: %w (last error: %v)", describe(obj), err, last)
	}
	return nil
}

func (d *demo) phases(ctx context.Context) (string, error) {
	var parts []string
	for {
		e, err := d.await(ctx, 60*time.Second, "phase done", func(e dev.Event) bool { return e.Kind == dev.PhaseDone })
		if err != nil {
			return "", err
		}
		if n := len(d.rep.PhasesDone); n > 0 && e.Phase <= d.rep.PhasesDone[n-1] {
			return "", fmt.Errorf("phase %d finished after phase %d", e.Phase, d.rep.PhasesDone[n-1])
		}
		d.rep.PhasesDone = append(d.rep.PhasesDone, e.Phase)
		parts = append(parts, fmt.Sprintf("phase %d", e.Phase))
		if e.Phase == 2 {
			break
		}
	}
	return strings.Join(parts, ", then ") + " done", nil
}

func (d *demo) registered(ctx context.Context) (string, error) {
	e, err := d.await(ctx, 60*time.Second, "webhooks enforced", func(e dev.Event) bool { return e.Kind == dev.WebhooksEnforced })
	if err != nil {
		return "", err
	}
	d.rep.Enforced = e.At
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: d.session.Module}, vwc); err != nil {
		return "", err
	}
	if len(vwc.Webhooks) == 0 {
		return "", fmt.Errorf("ValidatingWebhookConfiguration %s has no webhooks", vwc.Name)
	}
	policy := ""
	if p := vwc.Webhooks[0].FailurePolicy; p != nil {
		policy = string(*p)
	}
	return fmt.Sprintf("ValidatingWebhookConfiguration %s holds %d webhook(s), failurePolicy %s", vwc.Name, len(vwc.Webhooks), policy), nil
}

func pod(name string, privileged bool) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: "busybox"}
	if privileged {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: demoNS, Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

func (d *demo) createPod(ctx context.Context) (string, error) {
	p := pod("web", false)
	if err := d.c.Create(ctx, p); err != nil {
		return "", fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	d.rep.PodLabel = p.Labels[label]
	if d.rep.PodLabel == "" {
		return "", fmt.Errorf("pod %s/%s has no %s label: labels %v", p.Namespace, p.Name, label, p.Labels)
	}
	return fmt.Sprintf("pod %s/%s was created with label %s=%s", p.Namespace, p.Name, label, d.rep.PodLabel), nil
}

func (d *demo) privilegedDenied(ctx context.Context) (string, error) {
	err := d.c.Create(ctx, pod("debug-shell", true))
	if err == nil {
		return "", errors.New("the privileged pod was admitted")
	}
	if !apierrors.IsForbidden(err) {
		return "", fmt.Errorf("want the privileged pod denied, got: %w", err)
	}
	d.rep.Denial = err.Error()
	return "the API server said: " + err.Error(), nil
}

func (d *demo) exempted(ctx context.Context) (string, error) {
	ex := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "uds.dev/v1alpha1", "kind": "Exemption",
		"metadata": map[string]any{"name": "debug-tools", "namespace": exemptionNS},
		"spec": map[string]any{"exemptions": []any{map[string]any{
			"title":    "debug tools",
			"matcher":  map[string]any{"namespace": demoNS, "name": "^debug-.*"},
			"policies": []any{"DisallowPrivileged"},
		}}},
	}}
	if err := d.create(ctx, ex); err != nil {
		return "", err
	}
	d.say("    applied " + describe(ex) + ": pods named debug-* in namespace demo may run privileged")
	// The module's cache of Exemptions follows the API server closely; a
	// retry covers the moment between the write and its watch event.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		last = d.c.Create(ctx, pod("debug-shell", true))
		return last == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("the privileged pod is still refused: %v", last)
	}
	e, err := d.await(ctx, 5*time.Second, "validation of the exempted pod", func(e dev.Event) bool {
		return e.Kind == dev.Admitted && e.Review.Webhook == "validate" && e.Review.Name == "debug-shell"
	})
	if err != nil {
		return "", err
	}
	d.rep.Exempted = e.Review
	return fmt.Sprintf("pod %s/debug-shell admitted; warning: %s", demoNS, strings.Join(e.Review.Warnings, "; ")), nil
}

func (d *demo) status(ctx context.Context) (string, error) {
	cc := &unstructured.Unstructured{}
	cc.SetAPIVersion("uds.dev/v1alpha1")
	cc.SetKind("ClusterConfig")
	var status map[string]any
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := d.c.Get(ctx, client.ObjectKey{Name: "initial"}, cc); err != nil {
			return false, err
		}
		status, _, _ = unstructured.NestedMap(cc.Object, "status")
		gen, _, _ := unstructured.NestedInt64(cc.Object, "status", "observedGeneration")
		return status["phase"] == "Ready" && gen == cc.GetGeneration(), nil
	})
	if err != nil {
		return "", fmt.Errorf("ClusterConfig initial's status is %v: %w", status, err)
	}
	d.rep.Status = status
	return fmt.Sprintf("ClusterConfig initial: status.phase=%v, observedGeneration=%v, clusterName=%v", status["phase"], status["observedGeneration"], status["clusterName"]), nil
}

func (d *demo) snapshot() []dev.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]dev.Event(nil), d.rep.Events...)
}

// readObjects decodes the YAML documents of a file.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if obj.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", kind, obj.GetNamespace(), obj.GetName())
	}
	return kind + " " + obj.GetName()
}
