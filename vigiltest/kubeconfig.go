package vigiltest

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeConfigFile writes an admin kubeconfig into the test's temporary folder
// and returns its path, for processes and tools (kubectl, a module binary).
func (e *Env) KubeConfigFile(t testing.TB) string {
	t.Helper()
	data, err := e.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// WriteKubeConfig writes a kubeconfig for cfg (such as AsServiceAccountConfig's) into
// the test's temporary folder and returns its path, for module commands that
// take --kubeconfig.
func WriteKubeConfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	return writeKubeConfigIn(t, t.TempDir(), cfg)
}

// writeKubeConfigIn writes a kubeconfig for cfg as dir/kubeconfig.
func writeKubeConfigIn(t testing.TB, dir string, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["vigiltest"] = &clientcmdapi.Cluster{
		Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile,
		TLSServerName: cfg.ServerName, InsecureSkipTLSVerify: cfg.Insecure,
	}
	kc.AuthInfos["vigiltest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, ClientCertificate: cfg.CertFile,
		ClientKey: cfg.KeyFile, Token: cfg.BearerToken, Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups,
	}
	kc.Contexts["vigiltest"] = &clientcmdapi.Context{Cluster: "vigiltest", AuthInfo: "vigiltest"}
	kc.CurrentContext = "vigiltest"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	p := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
