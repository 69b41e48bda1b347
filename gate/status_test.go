package gate

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCondition(t *testing.T) {
	ready := Condition("Ready", metav1.ConditionTrue)
	withStatus := func(gen any, status map[string]any) map[string]any {
		f := map[string]any{"status": status}
		if gen != nil {
			f["metadata"] = map[string]any{"generation": gen}
		}
		return f
	}
	entry := func(status string, observed any) map[string]any {
		e := map[string]any{"type": "Ready", "status": status, "reason": "Reconciled"}
		if observed != nil {
			e["observedGeneration"] = observed
		}
		return e
	}
	runChecks(t, []checkCase{
		{"nil", ready, nil, false, "not found"},
		{"no status", ready, u("v1", "X", "x", nil), false, "condition Ready not set: no status.conditions"},
		{"conditions not a list", ready, u("v1", "X", "x", withStatus(nil, map[string]any{"conditions": "Ready"})), false, "status.conditions is string, want a list"},
		{"status not a map", ready, u("v1", "X", "x", map[string]any{"status": "Ready"}), false, ".status.conditions accessor error: Ready is of the type string, expected map[string]interface{}"},
		{"other types only", ready, u("v1", "X", "x", withStatus(nil, map[string]any{"conditions": conds("Available", "True", "")})), false, "condition Ready not set"},
		{"false with reason", ready, u("v1", "X", "x", withStatus(nil, map[string]any{"conditions": conds("Available", "True", "", "Ready", "False", "Waiting")})), false, "condition Ready=False (reason: Waiting), want True"},
		{"unknown without reason", ready, u("v1", "X", "x", withStatus(nil, map[string]any{"conditions": conds("Ready", "Unknown", "")})), false, "condition Ready=Unknown, want True"},
		{"no status field", ready, u("v1", "X", "x", withStatus(nil, map[string]any{"conditions": []any{map[string]any{"type": "Ready"}}})), false, "condition Ready has no status, want True"},
		{"true", ready, u("v1", "X", "x", withStatus(nil, map[string]any{"conditions": conds("Ready", "True", "Done")})), true, "condition Ready=True (reason: Done)"},
		{"want false", Condition("Degraded", metav1.ConditionFalse), u("v1", "X", "x", withStatus(nil, map[string]any{"conditions": conds("Degraded", "False", "")})), true, "condition Degraded=False"},
		{"type is case-sensitive", ready, u("v1", "X", "x", withStatus(nil, map[string]any{"conditions": conds("ready", "True", "")})), false, "condition Ready not set"},

		// Staleness: the condition's own observedGeneration wins when set.
		{"own observedGeneration stale", ready, u("v1", "X", "x", withStatus(int64(2), map[string]any{"conditions": []any{entry("True", int64(1))}})), false, "stale status: observedGeneration 1 < generation 2"},
		{"own observedGeneration current", ready, u("v1", "X", "x", withStatus(int64(2), map[string]any{"conditions": []any{entry("True", int64(2))}})), true, "condition Ready=True (reason: Reconciled)"},
		{"own observedGeneration beats status", ready, u("v1", "X", "x", withStatus(int64(2), map[string]any{"observedGeneration": int64(1), "conditions": []any{entry("True", int64(2))}})), true, "condition Ready=True (reason: Reconciled)"},
		{"own current but status stale is ignored", ready, u("v1", "X", "x", withStatus(int64(3), map[string]any{"observedGeneration": int64(3), "conditions": []any{entry("True", int64(2))}})), false, "stale status: observedGeneration 2 < generation 3"},
		{"status observedGeneration stale", ready, u("v1", "X", "x", withStatus(int64(2), map[string]any{"observedGeneration": int64(1), "conditions": []any{entry("True", nil)}})), false, "stale status: observedGeneration 1 < generation 2"},
		{"own zero falls back to status", ready, u("v1", "X", "x", withStatus(int64(2), map[string]any{"observedGeneration": int64(1), "conditions": []any{entry("True", int64(0))}})), false, "stale status: observedGeneration 1 < generation 2"},
		{"status observedGeneration zero is set", ready, u("v1", "X", "x", withStatus(int64(1), map[string]any{"observedGeneration": int64(0), "conditions": []any{entry("True", nil)}})), false, "stale status: observedGeneration 0 < generation 1"},
		{"status observedGeneration current", ready, u("v1", "X", "x", withStatus(int64(2), map[string]any{"observedGeneration": int64(2), "conditions": []any{entry("True", nil)}})), true, "condition Ready=True (reason: Reconciled)"},
		{"no observedGeneration anywhere", ready, u("v1", "X", "x", withStatus(int64(5), map[string]any{"conditions": []any{entry("True", nil)}})), true, "condition Ready=True (reason: Reconciled)"},
		{"no generation", ready, u("v1", "X", "x", withStatus(nil, map[string]any{"observedGeneration": int64(1), "conditions": []any{entry("True", nil)}})), true, "condition Ready=True (reason: Reconciled)"},
		{"stale even when status differs", ready, u("v1", "X", "x", withStatus(int64(2), map[string]any{"conditions": []any{entry("False", int64(1))}})), false, "stale status: observedGeneration 1 < generation 2"},
		{"float64 numbers from encoding/json", ready, u("v1", "X", "x", withStatus(float64(2), map[string]any{"conditions": []any{entry("True", float64(1))}})), false, "stale status: observedGeneration 1 < generation 2"},
		{"int numbers from hand-built objects", ready, u("v1", "X", "x", withStatus(2, map[string]any{"conditions": []any{entry("True", 1)}})), false, "stale status: observedGeneration 1 < generation 2"},
	})
	if got := ready.String(); got != "condition Ready=True" {
		t.Errorf("String() = %q, want %q", got, "condition Ready=True")
	}
}

func TestConditionValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cond    Cond
		wantErr string
	}{
		{"true", Condition("Ready", metav1.ConditionTrue), ""},
		{"false", Condition("Ready", "False"), ""},
		{"unknown", Condition("Ready", "Unknown"), ""},
		{"lowercase status", Condition("Ready", "true"), `gate.Condition("Ready", "true"): expected status True, False or Unknown, got "true"`},
		{"empty type", Condition("", "True"), `gate.Condition("", "True"): expected a condition type such as "Ready", got an empty string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cond.(Validator).Validate(configMapGVK)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestReady(t *testing.T) {
	deployment := func(gen, observed, replicas, updated, ready, available int64) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"generation": gen},
			"spec":     map[string]any{"replicas": replicas},
			"status": map[string]any{
				"observedGeneration": observed,
				"replicas":           replicas,
				"updatedReplicas":    updated,
				"readyReplicas":      ready,
				"availableReplicas":  available,
				"conditions":         conds("Available", "True", "MinimumReplicasAvailable", "Progressing", "True", "NewReplicaSetAvailable"),
			},
		}
	}
	runChecks(t, []checkCase{
		{"nil", Ready(), nil, false, "not found"},
		{"configmap is current once it exists", Ready(), u("v1", "ConfigMap", "c", nil), true, "Current: Resource is always ready"},
		{"deployment rolled out", Ready(), u("apps/v1", "Deployment", "d", deployment(2, 2, 3, 3, 3, 3)), true, "Current: Deployment is available. Replicas: 3"},
		{"deployment stale", Ready(), u("apps/v1", "Deployment", "d", deployment(2, 1, 3, 3, 3, 3)), false, "InProgress: Deployment generation is 2, but latest observed generation is 1"},
		{"deployment rolling", Ready(), u("apps/v1", "Deployment", "d", deployment(2, 2, 3, 1, 3, 3)), false, "InProgress: Updated: 1/3"},
		{"pod pending", Ready(), u("v1", "Pod", "p", map[string]any{"status": map[string]any{"phase": "Pending"}}), false, "InProgress: Pod is in the Pending phase"},
		{"custom resource ready false", Ready(), u("example.com/v1", "Widget", "w", map[string]any{"status": map[string]any{"conditions": conds("Ready", "False", "Waiting")}}), false, "InProgress (reason: Waiting)"},
		{"custom resource ready true", Ready(), u("example.com/v1", "Widget", "w", map[string]any{"status": map[string]any{"conditions": conds("Ready", "True", "")}}), true, "Current: Resource is Ready"},
		{"terminating", Ready(), u("v1", "ConfigMap", "c", map[string]any{"metadata": map[string]any{"deletionTimestamp": "2026-01-02T03:04:05Z"}}), false, "Terminating: Resource scheduled for deletion"},
	})
	if got := Ready().String(); got != "ready" {
		t.Errorf("String() = %q, want ready", got)
	}
}
