package admit

import (
	fastjson "github.com/goccy/go-json"
	admissionv1 "k8s.io/api/admission/v1"
)

// DecodeWhole decodes a review with the JSON decoder alone, as DecodeReview
// did before it handed the request's raw values over uncopied: what that
// must agree with.
func DecodeWhole(body []byte) (*admissionv1.AdmissionReview, error) {
	review := &admissionv1.AdmissionReview{}
	return review, fastjson.Unmarshal(body, review)
}
