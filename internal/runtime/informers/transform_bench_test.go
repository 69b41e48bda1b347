package informers

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// deploymentPod is the JSON of Pod i of a cluster of Deployments' pods, as
// an API server sends it: 100 pods a Deployment, 10 Deployments a namespace.
func deploymentPod(i int, whole bool) []byte {
	ns, dep := fmt.Sprintf("team-%04d", i/1000), fmt.Sprintf("web-%02d", (i/100)%10)
	hash := fmt.Sprintf("%08x", (i/100)*2654435761%(1<<32))[:10-len(dep)+4]
	name := fmt.Sprintf("%s-%s-%05x", dep, hash, i*7919%(1<<20))
	p := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": name, "generateName": dep + "-" + hash + "-", "namespace": ns,
			"uid": fmt.Sprintf("%08x-1111-2222-3333-%012x", i, i), "resourceVersion": fmt.Sprint(100000 + i),
			"creationTimestamp": "2026-12-06T10:00:00Z",
			"labels":            map[string]any{"app": dep, "pod-template-hash": hash},
			"ownerReferences": []any{map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": dep + "-" + hash,
				"uid": fmt.Sprintf("%08x-aaaa-bbbb-cccc-%012x", i/100, i/100), "controller": true, "blockOwnerDeletion": true}},
		},
	}
	if whole {
		p["spec"] = map[string]any{"securityContext": map[string]any{}, "terminationGracePeriodSeconds": 30, "enableServiceLinks": true,
			"priority": 0, "preemptionPolicy": "PreemptLowerPriority", "containers": []any{map[string]any{"name": "web", "image": "registry.example/web:1.2.3",
				"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}}}}, "nodeName": fmt.Sprintf("kwok-node-%d", i%1000),
			"tolerations": []any{map[string]any{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}},
			// The service account token volume every Pod gets.
			"volumes": []any{map[string]any{"name": fmt.Sprintf("kube-api-access-%05x", i), "projected": map[string]any{"sources": []any{
				map[string]any{"serviceAccountToken": map[string]any{"path": "token", "expirationSeconds": 3607}},
				map[string]any{"configMap": map[string]any{"name": "kube-root-ca.crt", "items": []any{map[string]any{"key": "ca.crt", "path": "ca.crt"}}}},
				map[string]any{"downwardAPI": map[string]any{"items": []any{map[string]any{"path": "namespace", "fieldRef": map[string]any{"apiVersion": "v1", "fieldPath": "metadata.namespace"}}}}},
			}}}}}
		p["status"] = map[string]any{"phase": "Running", "podIP": fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), "hostIP": fmt.Sprintf("10.255.%d.%d", i%1000/256, i%1000%256),
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-06T10:00:01Z"}}}
	}
	data, _ := json.Marshal(p)
	return data
}

// jobPod is the JSON of the Pod of a Job that came and went: its name,
// labels, owner and generateName its own.
func jobPod(i int) []byte {
	job := fmt.Sprintf("batch-%06d", i)
	uid := fmt.Sprintf("%08x-dddd-eeee-ffff-%012x", i, i)
	data, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": job + "-x", "generateName": job + "-", "namespace": fmt.Sprintf("jobs-%03d", i%100),
			"uid": fmt.Sprintf("%08x-1111-2222-4444-%012x", i, i), "resourceVersion": fmt.Sprint(900000 + i),
			"labels":          map[string]any{"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": job, "controller-uid": uid, "job-name": job},
			"ownerReferences": []any{map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid, "controller": true, "blockOwnerDeletion": true}},
		},
	})
	return data
}

// heapPerPod is the heap a store of n of deploymentPod's Pods takes, a
// Pod, after transform; churn Job Pods that come and go (transformed, not
// kept) come between each two of them, as in a busy cluster.
func heapPerPod(b *testing.B, n, churn int, whole bool, transform toolscache.TransformFunc) float64 {
	raw := make([][]byte, n)
	for i := range raw {
		raw[i] = deploymentPod(i, whole)
	}
	jobs := make([][]byte, n*churn)
	for i := range jobs {
		jobs[i] = jobPod(i)
	}
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, data := range raw {
		for _, job := range jobs[i*churn : (i+1)*churn] {
			p := &corev1.Pod{}
			if err := json.Unmarshal(job, p); err != nil {
				b.Fatal(err)
			}
			if _, err := transform(p); err != nil {
				b.Fatal(err)
			}
		}
		var obj any
		if whole {
			p := &corev1.Pod{}
			if err := json.Unmarshal(data, p); err != nil {
				b.Fatal(err)
			}
			obj = p
		} else {
			p := &metav1.PartialObjectMetadata{}
			if err := json.Unmarshal(data, p); err != nil {
				b.Fatal(err)
			}
			obj = p
		}
		obj, err := transform(obj)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(raw)
	runtime.KeepAlive(jobs)
	runtime.KeepAlive(store)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// BenchmarkHeapPerPod is the heap a Pod of 20,000 of 200 Deployments takes
// in a store, as metadata and whole, with managed fields stripped alone or
// the roles' Transform; churn=2 passes two Job Pods that come and go
// between each two, whose strings, labels and owners are their own.
func BenchmarkHeapPerPod(b *testing.B) {
	for _, churn := range []int{0, 2} {
		for _, whole := range []bool{false, true} {
			for _, name := range []string{"strip", "canonical"} {
				b.Run(fmt.Sprintf("churn=%d/whole=%v/%s", churn, whole, name), func(b *testing.B) {
					var per float64
					for range b.N {
						tf := stripOnly
						if name == "canonical" {
							tf = Transform()
						}
						per = heapPerPod(b, 20000, churn, whole, tf)
					}
					b.ReportMetric(per, "B/pod")
				})
			}
		}
	}
}

func stripOnly(obj any) (any, error) {
	if a, ok := obj.(metav1.Object); ok {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// BenchmarkRelistHeap holds 20,000 Pods as an informer does, then decodes
// every one again into a second store, as a relist does while the first
// still holds them, and reports the heap then against the first store's
// alone (after a collection each): with the roles' informers' transform
// (reuse=true: Reuse over the first store, then Transform) and without
// (Transform alone: every Pod held twice).
func BenchmarkRelistHeap(b *testing.B) {
	for _, c := range []struct{ whole, reuse bool }{{false, true}, {true, true}, {true, false}} {
		whole := c.whole
		b.Run(fmt.Sprintf("whole=%v/reuse=%v", whole, c.reuse), func(b *testing.B) {
			var ratio float64
			for range b.N {
				tf := Transform()
				n := 20000
				raw := make([][]byte, n)
				for i := range raw {
					raw[i] = deploymentPod(i, whole)
				}
				fill := func(tf toolscache.TransformFunc) toolscache.Indexer {
					store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
					for _, data := range raw {
						var obj any
						if whole {
							obj = &corev1.Pod{}
						} else {
							obj = &metav1.PartialObjectMetadata{}
						}
						if err := json.Unmarshal(data, obj); err != nil {
							b.Fatal(err)
						}
						obj, err := tf(obj)
						if err != nil {
							b.Fatal(err)
						}
						if err := store.Add(obj); err != nil {
							b.Fatal(err)
						}
					}
					return store
				}
				var base, steady, relist runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&base)
				first := fill(tf)
				runtime.GC()
				runtime.ReadMemStats(&steady)
				again := tf
				if c.reuse {
					again = Reuse(first, tf)
				}
				second := fill(again)
				runtime.GC()
				runtime.ReadMemStats(&relist)
				runtime.KeepAlive(first)
				runtime.KeepAlive(second)
				runtime.KeepAlive(raw)
				held := float64(steady.HeapAlloc - base.HeapAlloc)
				ratio = float64(relist.HeapAlloc-base.HeapAlloc) / held
				b.ReportMetric(held/float64(n), "B/pod")
			}
			b.ReportMetric(ratio, "relist/steady")
		})
	}
}
