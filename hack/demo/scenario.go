package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/commands/dev"
	"github.com/vigilkit/vigil/provenance"
)

// options configure a run of the demo.
type options struct {
	kubeconfig string // empty: an embedded control plane
	dir        string // the uds-core example
	crds       string // UDS Core's CRD files; empty: the stand-ins
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
	// Applied is when the CRDs and the ClusterConfig went in; CRDs says
	// whose (UDS Core's files or the stand-ins).
	Applied time.Time
	CRDs    string
	// PhasesDone lists the phases in the order they finished.
	PhasesDone []int
	Enforced   time.Time
	// Webhooks are the validating webhooks registered, with their failure
	// policies and namespace selectors.
	Webhooks []admissionregistrationv1.ValidatingWebhook
	// Mutated is the web Pod's mutated annotation, and its container's
	// security context as created.
	Mutated         string
	SecurityContext *corev1.SecurityContext
	Denial          string
	// Exempted is the privileged pod as admitted once exempted.
	Exempted *corev1.Pod
	Status   map[string]any
	Took     time.Duration
}

type step struct {
	Name   string
	Took   time.Duration
	Detail string
}

const (
	demoNS        = "demo"
	exemptionNS   = "uds-policy-exemptions"
	clusterConfig = "uds-cluster-config"
	// stampPolicy is the module's MutatingAdmissionPolicy that stamps
	// namespace creators.
	stampPolicy = "uds-core-namespace-created-by"
	// mutatedAnnotation lists the policies that mutated an object, as UDS
	// Core's mutations mark it.
	mutatedAnnotation = "uds-core.pepr.dev/mutated"
	// exemptedAnnotation marks a Pod exempt from DisallowPrivileged.
	exemptedAnnotation = "uds-core.pepr.dev/uds-core-policies.DisallowPrivileged"
)

// standInCRDs are UDS Core's CRDs' names with an open schema, for a
// machine without UDS Core's files.
//
//go:embed crds.yaml
var standInCRDs []byte

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
	d.say(d.bold("vigil demo: UDS Core's policy engine on vigil, from an empty cluster to admission, on a real API server"))
	steps := []struct {
		name string
		run  func(context.Context) (string, error)
	}{
		{"start the module before UDS Core's CRDs: its gates wait, nothing crash-loops", d.start},
		{"a few seconds later, apply UDS Core's CRDs and the ClusterConfig uds-cluster-config", d.apply},
		{"the gate phases pass, in order", d.phases},
		{"the webhooks register, only now: Fail, and Ignore in istio-system", d.registered},
		{"create a Pod: mutated to UDS Core's safe defaults", d.createPod},
		{"create a privileged Pod: denied with UDS Core's message", d.privilegedDenied},
		{"add an Exemption in uds-policy-exemptions and retry: admitted", d.exempted},
		{"the watcher sets the ClusterConfig's status to Ready", d.status},
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
	d.say("    Run it yourself: go run ./cmd/vigil dev ./examples/uds-core")
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
	// UDS Core's operator config is the platform's Secret "guaranteed to
	// exist at pod startup": the module's pods mount it and do not start
	// without it. UDS Core's chart creates it with the module.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: "uds-operator-config"},
		StringData: map[string]string{"KEYCLOAK_CLIENT_MODE": "AUTO", "AUTHSERVICE_REDIS_URI": ""}}
	if err := d.c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create the operator-config Secret: %w", err)
	}
	d.say("    UDS Core's Secret " + s.Namespace + "/uds-operator-config is in place, as the module's pods need it to start")
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
	var objs []*unstructured.Unstructured
	if d.o.crds == "" {
		d.rep.CRDs = "the demo's stand-ins for UDS Core's CRDs (hack/demo/crds.yaml)"
		crds, err := readObjects(bytes.NewReader(standInCRDs), "crds.yaml")
		if err != nil {
			return "", err
		}
		objs = crds
	} else {
		d.rep.CRDs = "UDS Core's CRDs from " + d.o.crds
		for _, file := range []string{"clusterconfig.uds.dev.yaml", "exemptions.uds.dev.yaml"} {
			f, err := os.Open(filepath.Join(d.o.crds, file))
			if err != nil {
				return "", fmt.Errorf("UDS Core's CRD file: %w (--crds names their folder; leave it empty for the demo's stand-ins)", err)
			}
			crds, err := readObjects(f, f.Name())
			f.Close()
			if err != nil {
				return "", err
			}
			objs = append(objs, crds...)
		}
	}
	d.say("    " + d.rep.CRDs)
	objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "uds.dev/v1alpha1", "kind": "ClusterConfig",
		"metadata": map[string]any{"name": clusterConfig},
		"spec": map[string]any{
			"expose":     map[string]any{"domain": "uds.dev"},
			"policy":     map[string]any{"allowAllNsExemptions": false},
			"attributes": map[string]any{"clusterName": "demo-cluster"},
		},
	}})
	for _, obj := range objs {
		if err := d.create(ctx, obj); err != nil {
			return "", err
		}
		d.say("    applied " + describe(obj))
	}
	d.rep.Applied = time.Now()
	return fmt.Sprintf("%d objects applied", len(objs)), nil
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
	d.rep.Webhooks = vwc.Webhooks
	var lines []string
	for _, w := range vwc.Webhooks {
		policy := "Fail"
		if w.FailurePolicy != nil {
			policy = string(*w.FailurePolicy)
		}
		where := "every namespace the module judges"
		if w.NamespaceSelector != nil {
			for _, e := range w.NamespaceSelector.MatchExpressions {
				if e.Key == corev1.LabelMetadataName {
					where = strings.ToLower(string(e.Operator)) + " " + strings.Join(e.Values, ", ")
				}
			}
		}
		lines = append(lines, fmt.Sprintf("%s: failurePolicy %s (%s)", w.Name, policy, where))
	}
	for _, l := range lines {
		d.say("    " + l)
	}
	return fmt.Sprintf("ValidatingWebhookConfiguration %s holds %d webhook(s)", vwc.Name, len(vwc.Webhooks)), nil
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
	d.rep.Mutated = p.Annotations[mutatedAnnotation]
	d.rep.SecurityContext = p.Spec.Containers[0].SecurityContext
	if d.rep.Mutated == "" {
		return "", fmt.Errorf("pod %s/%s has no %s annotation: annotations %v", p.Namespace, p.Name, mutatedAnnotation, p.Annotations)
	}
	sc, _ := json.Marshal(d.rep.SecurityContext)
	d.say("    container main's securityContext as created: " + string(sc))
	return fmt.Sprintf("pod %s/%s was created, %s=%s", p.Namespace, p.Name, mutatedAnnotation, d.rep.Mutated), nil
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
	// An Exemption applies only to a namespace a trusted identity created
	// since the module's stamp of namespace creators, or vouched for: demo
	// was created before the install, so the admin vouches for it.
	// The stamp's policy in the version of MutatingAdmissionPolicy the API
	// server serves: v1 from 1.36, v1beta1 or v1alpha1 where enabled before.
	mapping, err := d.c.RESTMapper().RESTMapping(schema.GroupKind{Group: admissionregistrationv1.GroupName, Kind: "MutatingAdmissionPolicy"})
	if err != nil {
		return "", fmt.Errorf("the module's stamp of namespace creators: %w", err)
	}
	stamp := &metav1.PartialObjectMetadata{}
	stamp.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := d.c.Get(ctx, client.ObjectKey{Name: stampPolicy}, stamp); err != nil {
		return "", fmt.Errorf("the module's stamp of namespace creators: %w", err)
	}
	vouch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provenance.VouchedUnder, stamp.UID)
	if err := d.c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNS}}, client.RawPatch(types.MergePatchType, []byte(vouch))); err != nil {
		return "", fmt.Errorf("vouch for namespace %s: %w", demoNS, err)
	}
	d.say("    namespace " + demoNS + " predates the install, so its creator is unknown: the admin vouches for it (annotation " + provenance.VouchedUnder + ")")
	// The module's cache of Exemptions follows the API server closely; a
	// retry covers the moment between the write and its watch event.
	// A denial on a cache that has not seen the Exemption yet is made
	// again on fresh data, so the first retry is admitted.
	p := pod("debug-shell", true)
	if err := d.c.Create(ctx, p); err != nil {
		return "", fmt.Errorf("the privileged pod is still refused: %w", err)
	}
	d.rep.Exempted = p
	mark := p.Annotations[exemptedAnnotation]
	if mark != "exempted" {
		return "", fmt.Errorf("pod %s/debug-shell was admitted without the annotation %s=exempted: annotations %v", demoNS, exemptedAnnotation, p.Annotations)
	}
	return fmt.Sprintf("pod %s/debug-shell admitted, %s=%s", demoNS, exemptedAnnotation, mark), nil
}

func (d *demo) status(ctx context.Context) (string, error) {
	cc := &unstructured.Unstructured{}
	cc.SetAPIVersion("uds.dev/v1alpha1")
	cc.SetKind("ClusterConfig")
	var status map[string]any
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := d.c.Get(ctx, client.ObjectKey{Name: clusterConfig}, cc); err != nil {
			return false, err
		}
		status, _, _ = unstructured.NestedMap(cc.Object, "status")
		gen, _, _ := unstructured.NestedInt64(cc.Object, "status", "observedGeneration")
		return status["phase"] == "Ready" && gen == cc.GetGeneration(), nil
	})
	if err != nil {
		return "", fmt.Errorf("ClusterConfig %s's status is %v: %w", clusterConfig, status, err)
	}
	d.rep.Status = status
	return fmt.Sprintf("ClusterConfig %s: status.phase=%v, observedGeneration=%v", clusterConfig, status["phase"], status["observedGeneration"]), nil
}

func (d *demo) snapshot() []dev.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]dev.Event(nil), d.rep.Events...)
}

// readObjects decodes the YAML documents of a file.
func readObjects(r io.Reader, path string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
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
