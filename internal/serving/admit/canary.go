package admit

import (
	fastjson "github.com/goccy/go-json"
	admissionv1 "k8s.io/api/admission/v1"
)

// CanaryWarning is the warning a replica answers a canary with: the API
// server passes it back to the client that sent the canary, which is how a
// registering replica learns that the API server reaches the module — even
// when another replica answered.
func CanaryWarning(token string) string { return "vigil-canary " + token }

// canary answers the registration's canary: allowed, with its token echoed
// back as a warning to whoever sent it, whichever replica answers.
func (h *Handler) canary(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if token := canaryToken(req); token != "" {
		resp.Warnings = []string{CanaryWarning(token)}
	}
	return resp
}

// canaryToken returns the token of a canary ConfigMap.
func canaryToken(req *admissionv1.AdmissionRequest) string {
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := fastjson.Unmarshal(req.Object.Raw, &cm); err != nil {
		return ""
	}
	return cm.Data["token"]
}
