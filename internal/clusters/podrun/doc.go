// Package podrun resolves, from a pod's spec as internal/shipping/manifests renders
// it, what a kubelet gives one of its containers, for a process run on the
// local machine instead: its environment (literal values, Secret and
// ConfigMap keys with their optional flags, the downward API fields vigil's
// pods use, envFrom), its volumes written into a local folder at their mount
// paths (Secret and ConfigMap keys or items, emptyDirs as folders), and its
// arguments, the command's first word standing for the image's entrypoint.
//
// It reads the Secrets and ConfigMaps through a Source, the API server's
// (Client) or any other, and holds no rules of its own on top of the
// kubelet's: vigil dev waits for what is missing and names where the module
// declared it; vigiltest fails the test as the kubelet fails the container.
// Both run the same resolution, so they cannot disagree on what a container
// is given.
package podrun
