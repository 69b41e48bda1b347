// Package cmdutil is what every vigil binary's command line shares — the
// vigil CLI and each module binary: exit codes, where controller-runtime's
// and client-go's logs go, the kubeconfig flags (KubeFlags) and loading a
// client config as kubectl does.
package cmdutil
