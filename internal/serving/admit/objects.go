package admit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	fastjson "github.com/goccy/go-json"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// metaOnce decodes the object's metadata for filters, once, when first asked.
func metaOnce(req *admissionv1.AdmissionRequest) func() spec.Meta {
	var m *spec.Meta
	return func() spec.Meta {
		if m != nil {
			return *m
		}
		raw := req.Object.Raw
		if req.Operation == admissionv1.Delete || len(raw) == 0 {
			raw = req.OldObject.Raw
		}
		pom := &metav1.PartialObjectMetadata{}
		_ = json.Unmarshal(raw, pom)
		m = &spec.Meta{Namespace: req.Namespace, Object: pom}
		return *m
	}
}

// objects holds a request's objects as the bindings see them: decoded once
// into the Go type of the binding that needs them, carried from binding to
// binding with their edits, and turned into a JSON patch at the end.
type objects struct {
	req *admissionv1.AdmissionRequest

	cur, old client.Object
	// pristine is true while cur is the request's object as it was sent,
	// decoded into the Go type of the binding at hand and edited by no
	// mutation yet: see asSent.
	pristine bool
	// orig is the object as it came, decoded into the Go type of the first
	// mutation: see original.
	orig *original
}

// original keeps the object as it came, to make the patch against. A type
// with a protobuf encoding (every built-in kind) is kept encoded, labels and
// annotations apart: encoding it costs a fraction of a deep copy, and
// comparing two encodings a fraction of comparing two objects field by
// field (reflect.DeepEqual), which for a Pod took half of a mutation's CPU.
// Other types (unstructured objects) are kept as a copy.
type original struct {
	typ                 reflect.Type
	gvk                 schema.GroupVersionKind
	labels, annotations map[string]string
	proto               []byte
	protoBuf            *[]byte // proto's buffer, from protoBuffers: see release
	copy                client.Object
	// src is the JSON it was decoded from, to decode it again when the
	// patch is made by diffing.
	src []byte
}

// protoObject is a type with a protobuf encoding, as k8s.io/api generates
// them: deterministic (map keys sorted), so equal encodings are equal
// objects — but for a nil and an empty slice or map, which it does not tell
// apart and neither does the API server.
type protoObject interface {
	client.Object
	Size() int
	MarshalToSizedBuffer(dst []byte) (int, error)
}

// protoBuffers hold encodings for as long as a request needs them.
var protoBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// encodeProto encodes p into a buffer from protoBuffers, returned with it.
func encodeProto(p protoObject) ([]byte, *[]byte, error) {
	buf := protoBuffers.Get().(*[]byte)
	size := p.Size()
	if cap(*buf) < size {
		*buf = make([]byte, size)
	}
	data := (*buf)[:size]
	n, err := p.MarshalToSizedBuffer(data)
	return data[size-n:], buf, err
}

// putProto returns a buffer encodeProto took, unless it grew too large to
// keep.
func putProto(buf *[]byte) {
	if buf != nil && cap(*buf) <= 256<<10 {
		protoBuffers.Put(buf)
	}
}

func keep(obj client.Object, src []byte) (*original, error) {
	o := &original{typ: reflect.TypeOf(obj), gvk: obj.GetObjectKind().GroupVersionKind(), src: src,
		labels: maps.Clone(obj.GetLabels()), annotations: maps.Clone(obj.GetAnnotations())}
	if p, ok := obj.(protoObject); ok {
		data, buf, err := encodeProto(p)
		if err != nil {
			putProto(buf)
			return nil, err
		}
		o.proto, o.protoBuf = data, buf
		return o, nil
	}
	o.copy = obj.DeepCopyObject().(client.Object)
	return o, nil
}

// object is the object as it came.
func (o *original) object() (client.Object, error) {
	if o.copy != nil {
		return o.copy, nil
	}
	obj := reflect.New(o.typ.Elem()).Interface().(client.Object)
	if err := fastjson.Unmarshal(o.src, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// onlyMetadataChanged reports whether cur, of the original's type, differs
// from it in nothing but its labels and annotations.
func (o *original) onlyMetadataChanged(cur client.Object) bool {
	labels, annotations := cur.GetLabels(), cur.GetAnnotations()
	cur.SetLabels(o.labels)
	cur.SetAnnotations(o.annotations)
	defer func() {
		cur.SetLabels(labels)
		cur.SetAnnotations(annotations)
	}()
	if o.copy != nil {
		// reflect.DeepEqual may see a difference where there is none (a
		// Quantity whose string form was cached while reading it): that
		// only sends the edit down the slower, general path.
		return reflect.DeepEqual(cur, o.copy)
	}
	if cur.GetObjectKind().GroupVersionKind() != o.gvk {
		return false
	}
	data, buf, err := encodeProto(cur.(protoObject))
	defer putProto(buf)
	return err == nil && bytes.Equal(data, o.proto)
}

// release gives back what the objects hold in pools, once the request is
// answered.
func (o *objects) release() {
	if o.orig != nil {
		o.orig.release()
	}
}

// release gives back the buffer of the original's encoding, once the patch
// is made.
func (o *original) release() {
	putProto(o.protoBuf)
	o.proto, o.protoBuf = nil, nil
}

func (o *objects) decode(b *spec.Binding) (obj, old client.Object, err error) {
	raw := o.sent()
	if o.cur == nil || !sameType(o.cur, b) {
		src := raw
		if o.cur != nil {
			// Another Go type edited the object before: carry its edits over.
			if src, err = json.Marshal(o.cur); err != nil {
				return nil, nil, err
			}
		}
		next := b.New()
		if err := fastjson.Unmarshal(src, next); err != nil {
			return nil, nil, fmt.Errorf("decode %s %s as %T: %w", o.req.Kind.Kind, o.req.Name, next, err)
		}
		o.cur, o.pristine = next, o.cur == nil
		if o.orig == nil && b.Action == spec.Mutate {
			if o.orig, err = keep(next, src); err != nil {
				return nil, nil, fmt.Errorf("keep %s %s as it came: %w", o.req.Kind.Kind, o.req.Name, err)
			}
		}
	}
	if len(o.req.OldObject.Raw) > 0 && o.req.Operation != admissionv1.Create {
		if o.old == nil || !sameType(o.old, b) {
			prev := b.New()
			if err := json.Unmarshal(o.req.OldObject.Raw, prev); err != nil {
				return nil, nil, fmt.Errorf("decode the old %s %s as %T: %w", o.req.Kind.Kind, o.req.Name, prev, err)
			}
			o.old = prev
		}
	}
	return o.cur, o.old, nil
}

// asSent decodes the request's object again, into binding b's Go type, as
// it was sent: the object as a mutation found it while pristine.
func (o *objects) asSent(b *spec.Binding) (client.Object, error) {
	raw := o.sent()
	obj := b.New()
	if err := fastjson.Unmarshal(raw, obj); err != nil {
		return nil, fmt.Errorf("decode %s %s as %T again: %w", o.req.Kind.Kind, o.req.Name, obj, err)
	}
	return obj, nil
}

// sent is the request's object as the API server sent it: the old object
// on DELETE, which has no other.
func (o *objects) sent() []byte {
	if o.req.Operation == admissionv1.Delete {
		return o.req.OldObject.Raw
	}
	return o.req.Object.Raw
}

func sameType(obj client.Object, b *spec.Binding) bool {
	return reflect.TypeOf(obj) == b.Type
}

// patch is the JSON patch from the object as it came to the object now.
func (o *objects) patch() ([]byte, error) {
	if o.cur == nil || o.orig == nil {
		return nil, nil
	}
	// Most mutations edit only labels and annotations: their patch is made
	// from the two maps instead of diffing the whole object.
	if reflect.TypeOf(o.cur) == o.orig.typ && o.orig.onlyMetadataChanged(o.cur) {
		ops := mapPatch(nil, "/metadata/labels", o.orig.labels, o.cur.GetLabels())
		ops = mapPatch(ops, "/metadata/annotations", o.orig.annotations, o.cur.GetAnnotations())
		if len(ops) == 0 {
			return nil, nil
		}
		return encodePatch(ops)
	}
	// Edits beyond labels and annotations: diff the two encodings. Both go
	// through the Go type, so fields it encodes differently from the API
	// server (a null creationTimestamp, say) are not patched.
	orig, err := o.orig.object()
	if err != nil {
		return nil, err
	}
	normalized, err := json.Marshal(orig)
	if err != nil {
		return nil, err
	}
	final, err := json.Marshal(o.cur)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(final, normalized) {
		return nil, nil
	}
	ops, err := jsonpatch.CreatePatch(normalized, final)
	if err != nil {
		return nil, fmt.Errorf("compute the patch: %w", err)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

func mapPatch(ops []jsonpatch.Operation, path string, before, after map[string]string) []jsonpatch.Operation {
	switch {
	case len(before) == 0 && len(after) == 0:
		return ops
	case len(before) == 0:
		return append(ops, jsonpatch.Operation{Operation: "add", Path: path, Value: after})
	case len(after) == 0:
		return append(ops, jsonpatch.Operation{Operation: "remove", Path: path})
	}
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + "/" + pointerEscape.Replace(k)
		old, had := before[k]
		v, has := after[k]
		switch {
		case has && !had:
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: p, Value: v})
		case has && v != old:
			ops = append(ops, jsonpatch.Operation{Operation: "replace", Path: p, Value: v})
		case !has:
			ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: p})
		}
	}
	return ops
}

// pointerEscape escapes a JSON pointer segment (RFC 6901).
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")
