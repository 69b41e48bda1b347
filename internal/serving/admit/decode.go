package admit

import (
	"bytes"
	"errors"
	"fmt"

	fastjson "github.com/goccy/go-json"
	admissionv1 "k8s.io/api/admission/v1"
)

// DecodeReview decodes an AdmissionReview v1 with a request, or says what was
// expected and what was seen.
func DecodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	review := &admissionv1.AdmissionReview{}
	if err := unmarshalReview(body, review); err != nil {
		return nil, fmt.Errorf("expected a JSON AdmissionReview (admission.k8s.io/v1): %w", err)
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got apiVersion %q kind %q: list only v1 in the webhook's admissionReviewVersions", review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, errors.New("expected an AdmissionReview with a request, got none")
	}
	if review.Request.UID == "" {
		return nil, errors.New("expected the request to carry a uid, got none")
	}
	return review, nil
}

// unmarshalReview decodes an AdmissionReview. The request's object, old
// object and options — nearly all of a review's bytes — are found by a scan
// and handed over as slices of body, not copied: decoded as they are by the
// JSON decoder, each would be scanned, copied for its UnmarshalJSON and
// copied again by it, which costs more than decoding the rest of the
// review. The rest, with those three values replaced by null, goes through
// the decoder. A body the scan does not follow exactly as the decoder would
// (a key written with escapes, or in another case, or twice; JSON the scan
// finds malformed) is decoded whole, as before.
func unmarshalReview(body []byte, review *admissionv1.AdmissionReview) error {
	raws, ok := scanReview(body)
	if !ok {
		return fastjson.Unmarshal(body, review)
	}
	slim := make([]byte, 0, len(body)-raws.size()+3*len("null"))
	at := 0
	for _, r := range raws.ordered() {
		slim = append(append(slim, body[at:r.start]...), "null"...)
		at = r.end
	}
	slim = append(slim, body[at:]...)
	if err := fastjson.Unmarshal(slim, review); err != nil {
		return err
	}
	if req := review.Request; req != nil {
		req.Object.Raw = raws.object.value(body)
		req.OldObject.Raw = raws.oldObject.value(body)
		req.Options.Raw = raws.options.value(body)
	}
	return nil
}

// span is where a value lies in the body; end 0 when absent.
type span struct{ start, end int }

// value is the span's bytes, nil when absent or null (as RawExtension
// decodes null).
func (s span) value(body []byte) []byte {
	if s.end == 0 {
		return nil
	}
	v := body[s.start:s.end:s.end]
	if string(v) == "null" {
		return nil
	}
	return v
}

type rawSpans struct{ object, oldObject, options span }

func (r *rawSpans) size() int {
	return r.object.end - r.object.start + r.oldObject.end - r.oldObject.start + r.options.end - r.options.start
}

// ordered are the spans present, in the order they lie in the body.
func (r *rawSpans) ordered() []span {
	out := make([]span, 0, 3)
	for _, s := range []span{r.object, r.oldObject, r.options} {
		if s.end == 0 {
			continue
		}
		i := len(out)
		for i > 0 && out[i-1].start > s.start {
			i--
		}
		out = append(out, span{})
		copy(out[i+1:], out[i:])
		out[i] = s
	}
	return out
}

// scanReview finds the request's object, oldObject and options in a review.
// ok is false when the body is not one the scan follows exactly as the
// decoder would.
func scanReview(b []byte) (raws rawSpans, ok bool) {
	var sawRequest bool
	end := scanObject(b, skipSpace(b, 0), func(key []byte, start, end int) bool {
		if !bytes.Equal(key, []byte("request")) {
			return !bytes.EqualFold(key, []byte("request"))
		}
		if sawRequest {
			return false // twice: the decoder keeps the last one
		}
		sawRequest = true
		if b[start] != '{' {
			return string(b[start:end]) == "null"
		}
		return scanObject(b[:end], start, func(key []byte, start, end int) bool {
			var s *span
			switch string(key) {
			case "object":
				s = &raws.object
			case "oldObject":
				s = &raws.oldObject
			case "options":
				s = &raws.options
			default:
				return !bytes.EqualFold(key, []byte("object")) && !bytes.EqualFold(key, []byte("oldObject")) && !bytes.EqualFold(key, []byte("options"))
			}
			if s.end != 0 {
				return false // twice
			}
			*s = span{start, end}
			return true
		}) >= 0
	})
	// Nothing but whitespace may follow the review.
	return raws, end >= 0 && sawRequest && skipSpace(b, end) == len(b)
}

// scanObject walks the object at b[i], calling each(key, valueStart,
// valueEnd) for each member until each returns false. It returns the index
// after the object, or -1 when it is malformed, a key has escapes, or each
// returned false.
func scanObject(b []byte, i int, each func(key []byte, start, end int) bool) int {
	if i >= len(b) || b[i] != '{' {
		return -1
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for i < len(b) {
		if b[i] != '"' {
			return -1
		}
		end, ok := skipString(b, i)
		if !ok {
			return -1
		}
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return -1
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return -1
		}
		vend, ok := skipValue(b, i)
		if !ok || !each(key, i, vend) {
			return -1
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
	return -1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i].
func skipString(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		backslashes := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j + 1, true
		}
		j++
	}
}

// skipValue returns the index after the value that starts at b[i]. It
// checks the nesting of objects and arrays and that strings end; the values
// handed over raw are decoded, and so checked, by whoever reads them.
func skipValue(b []byte, i int) (int, bool) {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		var stack []byte
		for j := i; j < len(b); {
			switch c := b[j]; c {
			case '"':
				end, ok := skipString(b, j)
				if !ok {
					return 0, false
				}
				j = end
				continue
			case '{', '[':
				stack = append(stack, c)
			case '}', ']':
				if len(stack) == 0 || stack[len(stack)-1] != c-2 { // '{'+2 == '}', '['+2 == ']'
					return 0, false
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return j + 1, true
				}
			}
			j++
		}
		return 0, false
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		return j, j > i
	}
}
