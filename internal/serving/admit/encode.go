package admit

import (
	"encoding/base64"
	"slices"
	"sync"
	"unicode/utf8"

	fastjson "github.com/goccy/go-json"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The answer to a review is written by hand when it is an allow or a plain
// denial's envelope without a status — nearly every answer — into a pooled
// buffer: the same bytes the JSON encoder writes (TestEncodeMatchesJSON),
// without its reflection and allocations. Anything else goes through the
// encoder.

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// encodeReview appends the JSON of an AdmissionReview v1 holding resp to
// dst.
func encodeReview(dst []byte, resp *admissionv1.AdmissionResponse) ([]byte, error) {
	if resp.Result != nil || len(resp.AuditAnnotations) > 0 || !utf8.ValidString(string(resp.UID)) || !validStrings(resp.Warnings) {
		data, err := fastjson.Marshal(&admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta, Response: resp})
		return append(dst, data...), err
	}
	dst = append(dst, `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":`...)
	dst = appendString(dst, string(resp.UID))
	if resp.Allowed {
		dst = append(dst, `,"allowed":true`...)
	} else {
		dst = append(dst, `,"allowed":false`...)
	}
	if len(resp.Patch) > 0 {
		dst = append(dst, `,"patch":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, resp.Patch)
		dst = append(dst, '"')
	}
	if resp.PatchType != nil {
		dst = append(dst, `,"patchType":`...)
		dst = appendString(dst, string(*resp.PatchType))
	}
	if len(resp.Warnings) > 0 {
		dst = append(dst, `,"warnings":[`...)
		for i, w := range resp.Warnings {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, w)
		}
		dst = append(dst, ']')
	}
	return append(dst, "}}"...), nil
}

// encodePatch is the JSON of a patch of labels and annotations, as
// metadataPatch makes them: values are strings or maps of strings.
func encodePatch(ops []jsonpatch.Operation) ([]byte, error) {
	for _, op := range ops {
		valid := utf8.ValidString(op.Path)
		switch v := op.Value.(type) {
		case string:
			valid = valid && utf8.ValidString(v)
		case map[string]string:
			for k, e := range v {
				valid = valid && utf8.ValidString(k) && utf8.ValidString(e)
			}
		}
		if !valid {
			return fastjson.Marshal(ops) // it writes invalid UTF-8 as encoding/json does
		}
	}
	dst := make([]byte, 0, 128)
	dst = append(dst, '[')
	for i, op := range ops {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"op":`...)
		dst = appendString(dst, op.Operation)
		dst = append(dst, `,"path":`...)
		dst = appendString(dst, op.Path)
		switch v := op.Value.(type) {
		case nil:
		case string:
			dst = append(dst, `,"value":`...)
			dst = appendString(dst, v)
		case map[string]string:
			dst = append(dst, `,"value":{`...)
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for j, k := range keys {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = appendString(dst, k)
				dst = append(dst, ':')
				dst = appendString(dst, v[k])
			}
			dst = append(dst, '}')
		default:
			return fastjson.Marshal(ops)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}

func validStrings(ss []string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// appendString appends s, valid UTF-8, as a JSON string escaped as
// encoding/json escapes it (HTML characters and U+2028, U+2029 included).
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// reviewTypeMeta is what an answer is: DecodeReview accepts only v1.
var reviewTypeMeta = metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}
