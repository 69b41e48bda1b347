package admit

import (
	"encoding/json"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The hand-written answers are the bytes encoding/json writes.
func TestEncodeMatchesJSON(t *testing.T) {
	pt := admissionv1.PatchTypeJSONPatch
	odd := "quote \" backslash \\ newline \n tab \t cr \r nul \x00 bell \x07 html <a&b> line sep \u2028 \u2029 ünïcødé 日本"
	responses := []*admissionv1.AdmissionResponse{
		{UID: "a", Allowed: true},
		{UID: types.UID(odd), Allowed: true, Warnings: []string{odd, "", "plain"}},
		{UID: "b", Allowed: true, Patch: []byte(`[{"op":"add","path":"/metadata/labels/x","value":"y"}]`), PatchType: &pt},
		{UID: "c", Allowed: false},
		{UID: "d", Allowed: false, Result: &metav1.Status{Status: metav1.StatusFailure, Code: 403, Message: odd, Reason: metav1.StatusReasonForbidden}, Warnings: []string{"w"}},
		{UID: "e", Allowed: true, AuditAnnotations: map[string]string{"k": "v"}},
		{UID: "f", Allowed: true, Warnings: []string{"bad utf-8 \xff\xfe"}},
	}
	for _, resp := range responses {
		got, err := encodeReview(nil, resp)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta, Response: resp})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("encodeReview(%+v):\n got %s\nwant %s", resp, got, want)
		}
	}
	patches := [][]jsonpatch.Operation{
		{{Operation: "add", Path: "/metadata/labels", Value: map[string]string{"b": odd, "a": "1", "c<": ""}}},
		{{Operation: "add", Path: "/metadata/labels/vigil.dev~1labeled", Value: "true"}, {Operation: "replace", Path: "/metadata/annotations/x", Value: ""}, {Operation: "remove", Path: "/metadata/labels/" + odd}},
		{{Operation: "add", Path: "/metadata/annotations/x", Value: "bad utf-8 \xff"}},
	}
	for _, ops := range patches {
		got, err := encodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(ops)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("encodePatch(%+v):\n got %s\nwant %s", ops, got, want)
		}
	}
}
