// Package fault puts a proxy between the code under test and the API server
// of a vigiltest.Env, and does to its connections and requests what a
// network, a load balancer or the API server itself does when things go
// wrong: an outage, a reset, a blackhole, a half-open connection, 429s with
// Retry-After, watches that expire with 410 Gone, and watch events held
// back.
//
//	p, err := fault.NewProxy(env.Config, fault.Options{})
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { p.Close() })
//	// run the role with p.Config(), or a kubeconfig of it, then:
//	p.ExpireWatches(2 * time.Second)
//
// It is apart from vigiltest so that a module's tests link it only when
// they test how the module lives through a fault.
package fault
