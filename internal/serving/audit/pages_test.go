package audit_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vigilkit/vigil/internal/serving/audit"
)

// expiredContinue is the API server's answer to a continue token older
// than etcd's compaction (apiserver storage/etcd3, handleCompactedErrorForPaging):
// 410 Gone, with a token that resumes after the last object returned.
func expiredContinue(token string) error {
	err := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. ...")
	err.ErrStatus.ListMeta.Continue = token
	return err
}

func page(cont string, names ...string) *corev1.ConfigMapList {
	l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{Continue: cont}}
	for _, n := range names {
		l.Items = append(l.Items, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return l
}

// A continue token that expires mid-list resumes with the token the 410
// carries, never with a full list of everything; one without such a token
// ends the run with the error.
func TestPagesResumeAfterAnExpiredContinueWithoutAFullList(t *testing.T) {
	var calls []metav1.ListOptions
	list := func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
		calls = append(calls, o)
		switch o.Continue {
		case "":
			return page("t1", "a", "b"), nil
		case "t1":
			return nil, expiredContinue("t2")
		case "t2":
			return page("", "c"), nil
		}
		t.Fatalf("a list with continue %q", o.Continue)
		return nil, nil
	}
	var seen []string
	err := audit.EachItem(t.Context(), 2, metav1.ListOptions{}, list, func(o runtime.Object) error {
		seen = append(seen, o.(*corev1.ConfigMap).Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"a", "b", "c"}) {
		t.Errorf("items %v, want a, b, c", seen)
	}
	var continues []string
	for _, o := range calls {
		if o.Limit != 2 {
			t.Errorf("a list with limit %d, want every page at 2: %+v", o.Limit, o)
		}
		continues = append(continues, o.Continue)
	}
	if !slices.Equal(continues, []string{"", "t1", "t2"}) {
		t.Errorf("lists with continue tokens %q, want \"\", t1, then t2 from the 410 (no full list)", continues)
	}

	calls = nil
	bare := func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
		calls = append(calls, o)
		if o.Continue == "" {
			return page("t1", "a"), nil
		}
		return nil, expiredContinue("")
	}
	err = audit.EachItem(t.Context(), 1, metav1.ListOptions{}, bare, func(runtime.Object) error { return nil })
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("an expired continue without a new token: %v; want the 410 returned", err)
	}
	if len(calls) != 2 {
		t.Errorf("%d lists after an expired continue without a new token, want 2 (no full list): %+v", len(calls), calls)
	}
}
