package admit

import (
	"net/http"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/events"
)

func TestEffectOfMapsEachModeAndVerdict(t *testing.T) {
	for _, c := range []struct {
		mode             spec.Mode
		enforce, allowed bool
		want             effect
	}{
		{spec.Enforce, false, true, effectPass},
		{spec.Enforce, false, false, effectDeny},
		{spec.Warn, false, true, effectPass},
		{spec.Warn, false, false, effectWarn},
		{spec.Audit, false, true, effectPass},
		{spec.Audit, false, false, effectRecord},
		{"", false, true, effectPass},
		{"", false, false, effectDeny}, // no mode enforces
		// The audit judges every mode as enforced.
		{spec.Enforce, true, false, effectDeny},
		{spec.Warn, true, false, effectDeny},
		{spec.Audit, true, false, effectDeny},
		{spec.Warn, true, true, effectPass},
		{spec.Audit, true, true, effectPass},
	} {
		if got := effectOf(c.mode, c.enforce, c.allowed); got != c.want {
			t.Errorf("effectOf(%q, enforce %v, allowed %v) = %d, want %d", c.mode, c.enforce, c.allowed, got, c.want)
		}
	}
}

func TestDenialCarriesTheVerdictsCodeReasonAndEarlierWarnings(t *testing.T) {
	for _, c := range []struct {
		v          admission.Verdict
		code       int32
		wantReason metav1.StatusReason
	}{
		{v: admission.Deny("no app label"), code: http.StatusForbidden, wantReason: metav1.StatusReasonForbidden},
		{v: admission.DenyCode(http.StatusBadRequest, "no app label"), code: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest},
		{v: admission.DenyCode(http.StatusUnprocessableEntity, "no app label"), code: http.StatusUnprocessableEntity, wantReason: metav1.StatusReasonInvalid},
		{v: admission.DenyCode(http.StatusConflict, "no app label"), code: http.StatusConflict, wantReason: metav1.StatusReasonConflict},
		{v: admission.DenyCode(http.StatusTeapot, "no app label"), code: http.StatusTeapot, wantReason: ""},
	} {
		resp := denial(c.v, []string{"earlier"})
		if resp.Allowed || resp.Result == nil {
			t.Fatalf("denial(%d) = %+v, want a denial with a status", c.code, resp)
		}
		r := resp.Result
		if r.Code != c.code || r.Reason != c.wantReason || r.Message != "no app label" || r.Status != metav1.StatusFailure {
			t.Errorf("denial(%d).Result = %+v, want code %d reason %q message %q", c.code, r, c.code, c.wantReason, "no app label")
		}
		if !slices.Equal(resp.Warnings, []string{"earlier"}) {
			t.Errorf("denial(%d).Warnings = %q, want the earlier bindings' [earlier]", c.code, resp.Warnings)
		}
	}
}

func TestUnenforcedDenialsWarnInWarnModeAndAreRecordedInAuditMode(t *testing.T) {
	h, reg, logs := stageHandler(t, Options{})
	rv := &reviewRun{h: h, req: stageRequest(), dryRun: true}
	v := admission.Deny("images must be signed")

	warn := stageBinding("signing", "signed", spec.Warn)
	got := rv.unenforced(warn, v, []string{"earlier"})
	want := []string{"earlier", `vigil module mod: capability "signing" binding "signed" would deny this (mode Warn, not enforced): images must be signed`}
	if !slices.Equal(got, want) {
		t.Errorf("Warn: warnings = %q, want %q", got, want)
	}
	if n := len(logs.with(string(events.AuditFinding))); n != 0 {
		t.Errorf("Warn mode logged %d audit findings, want none", n)
	}

	audit := stageBinding("signing", "audited", spec.Audit)
	got = rv.unenforced(audit, v, []string{"earlier"})
	if !slices.Equal(got, []string{"earlier"}) {
		t.Errorf("Audit: warnings = %q, want the client told nothing more: [earlier]", got)
	}
	if found := logs.with(string(events.AuditFinding), `"binding":"audited"`, `"mode":"Audit"`, `"violation":"images must be signed"`, `"kind":"Pod"`,
		`"namespace":"apps"`, `"name":"web"`, `"operation":"CREATE"`, `"dryRun":true`); len(found) != 1 {
		t.Errorf("Audit: %d findings logged for the denial, want 1; log: %q", len(found), logs.lines)
	}

	for _, b := range []*spec.Binding{warn, audit} {
		if n, _, _ := sample(t, reg, "vigil_admission_unenforced_denials_total", map[string]string{"capability": "signing", "binding": b.Name, "mode": string(b.Mode)}); n != 1 {
			t.Errorf("unenforced denials of %s (%s) = %v, want 1", b.Name, b.Mode, n)
		}
	}
}
