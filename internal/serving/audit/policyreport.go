package audit

import (
	"context"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// PolicyReports (spec.PolicyReports, spec.ClusterPolicyReports) are labelled
// ModuleLabel=module. A run replaces the last run's reports and deletes those
// of namespaces without findings now.

// ModuleLabel labels a module's PolicyReports with its name.
const ModuleLabel = "vigil.dev/module"

// MaxResults bounds the results of one PolicyReport, which is one object of
// at most 1.5 MiB; Summary counts all.
const MaxResults = 500

// writePolicyReports keeps the findings as PolicyReports, if the cluster
// serves them; a cluster without the CRDs has the findings in the Store and
// the Events only.
func (a *Auditor) writePolicyReports(ctx context.Context, findings []Finding) {
	cs, err := a.client()
	if err != nil {
		return
	}
	served := map[string]bool{}
	if list, err := cs.Discovery().ServerResourcesForGroupVersion(spec.PolicyReports.GroupVersion().String()); err == nil {
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
	} else if !apierrors.IsNotFound(err) {
		a.Log.Info("audit: cannot tell whether the cluster serves PolicyReports; findings are kept in the Store only", "err", err.Error())
		return
	}
	if !served[spec.PolicyReports.Resource] && !served[spec.ClusterPolicyReports.Resource] {
		return
	}
	hc, err := a.httpClient()
	if err != nil {
		return
	}
	dyn, err := dynamic.NewForConfigAndClient(a.Config, hc)
	if err != nil {
		return
	}
	byNS := map[string][]Finding{}
	for _, f := range findings {
		byNS[f.Namespace] = append(byNS[f.Namespace], f)
	}
	name := spec.PolicyReportName(a.Module.Name)
	for ns, fs := range byNS {
		res, kind := spec.PolicyReports, "PolicyReport"
		if ns == "" {
			res, kind = spec.ClusterPolicyReports, "ClusterPolicyReport"
		}
		if !served[res.Resource] {
			continue
		}
		if err := a.upsert(ctx, dyn.Resource(res).Namespace(ns), a.policyReport(kind, ns, name, fs)); err != nil && ctx.Err() == nil {
			a.Log.Error(err, "audit: write the findings as a "+kind, "namespace", ns, "name", name)
		}
	}
	// The last run's reports of namespaces without findings now go. They
	// are found by name (a metadata.name field selector, which RBAC narrows
	// to resourceNames: the watcher may not list other tools' reports) and
	// read as metadata only, a page at a time.
	if served[spec.PolicyReports.Resource] {
		mc, err := metadata.NewForConfigAndClient(a.Config, hc)
		if err != nil {
			return
		}
		sel := metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
			LabelSelector: ModuleLabel + "=" + a.Module.Name,
		}
		for _, ns := range a.Module.ReportNamespaces() {
			c := mc.Resource(spec.PolicyReports).Namespace(ns)
			list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
			err := eachItem(ctx, a.PageSize, sel, list, func(item runtime.Object) error {
				r, ok := item.(*metav1.PartialObjectMetadata)
				if !ok {
					return nil
				}
				if _, ok := byNS[r.Namespace]; !ok && r.Name == name {
					err := dyn.Resource(spec.PolicyReports).Namespace(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
					if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
						a.Log.Info("audit: delete the module's PolicyReport of a namespace without findings now", "namespace", r.Namespace, "name", r.Name, "err", err.Error())
					}
				}
				return nil
			})
			if err != nil {
				a.Log.V(1).Info("audit: list the module's PolicyReports", "namespace", ns, "err", err.Error())
			}
		}
	}
	if _, ok := byNS[""]; !ok && served[spec.ClusterPolicyReports.Resource] {
		err := dyn.Resource(spec.ClusterPolicyReports).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			a.Log.V(1).Info("audit: delete the module's ClusterPolicyReport", "err", err.Error())
		}
	}
}

func (a *Auditor) upsert(ctx context.Context, c dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	have, err := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, obj, metav1.CreateOptions{FieldManager: "vigil-audit"})
		return err
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(have.GetResourceVersion())
	_, err = c.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "vigil-audit"})
	return err
}

// policyReport is one namespace's report: a result per finding, failing.
func (a *Auditor) policyReport(kind, ns, name string, findings []Finding) *unstructured.Unstructured {
	m := a.Module
	sort.Slice(findings, func(i, j int) bool {
		if findings[i].Capability != findings[j].Capability {
			return findings[i].Capability < findings[j].Capability
		}
		return findings[i].Name < findings[j].Name
	})
	var results []any
	for i, f := range findings {
		if i == MaxResults {
			break
		}
		category := "validation"
		if f.Action == spec.Mutate {
			category = "mutation-skipped"
		}
		msg := f.Violation
		if len(msg) > maxViolation {
			msg = strings.ToValidUTF8(msg[:maxViolation], "") + "…"
		}
		props := map[string]any{
			"admitted": f.Admitted, "created": f.Created.UTC().Format("2006-01-02T15:04:05Z"),
			"policyVersion": versionOrNone(f.Policy),
		}
		if f.Registered != "" {
			props["registeredVersion"] = f.Registered
		}
		if f.Outage != "" {
			props["outage"] = f.Outage
		}
		results = append(results, map[string]any{
			"source":     "vigil",
			"policy":     m.Name,
			"rule":       f.Capability,
			"category":   category,
			"result":     "fail",
			"scored":     true,
			"message":    msg,
			"timestamp":  map[string]any{"seconds": metav1.Now().Unix(), "nanos": int64(0)},
			"resources":  []any{map[string]any{"apiVersion": f.APIVersion, "kind": f.Kind, "namespace": f.Namespace, "name": f.Name, "uid": string(f.UID)}},
			"properties": props,
		})
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": spec.PolicyReports.GroupVersion().String(),
		"kind":       kind,
		"metadata": map[string]any{
			"name": name,
			"labels": map[string]any{
				ModuleLabel:                    m.Name,
				"app.kubernetes.io/managed-by": "vigil",
			},
			"annotations": map[string]any{
				"vigil.dev/policy-version": versionOrNone(m.Version),
			},
		},
		"summary": map[string]any{"pass": int64(0), "fail": int64(len(findings)), "warn": int64(0), "error": int64(0), "skip": int64(0)},
		"results": results,
	}}
	if ns != "" {
		obj.SetNamespace(ns)
	}
	return obj
}
