package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vigilkit/vigil/internal/serving/certs"
)

// certValidity is how long the node's certificates hold: a node lives for
// a test run or a session.
const certValidity = 7 * 24 * time.Hour

// identities are the users the components authenticate as, by client
// certificate: the names and groups Kubernetes' bootstrap RBAC grants.
var identities = map[string]struct {
	user   string
	groups []string
}{
	"admin":                   {"vigil-admin", []string{"system:masters"}},
	"kube-controller-manager": {"system:kube-controller-manager", nil},
	"kube-scheduler":          {"system:kube-scheduler", nil},
	"kube-proxy":              {"system:kube-proxy", nil},
	// kubelet is system:node:<name>, set where the name is known.
}

// writePKI writes the node's certificates and kubeconfigs into dir/pki and
// returns each component's kubeconfig path ("admin" for the admin's).
// server is the API server's URL; hosts are the names and addresses its
// serving certificate holds.
func writePKI(dir, server, nodeName string, hosts []string) (kubeconfigs map[string]string, err error) {
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return nil, err
	}
	ca, err := certs.NewCA("vigil-node-ca", certValidity)
	if err != nil {
		return nil, err
	}
	write := func(name string, data []byte) error {
		return os.WriteFile(filepath.Join(pkiDir, name), data, 0o600)
	}
	if err := write("ca.crt", ca.CertPEM); err != nil {
		return nil, err
	}
	if err := write("ca.key", ca.KeyPEM()); err != nil {
		return nil, err
	}
	serving, err := ca.Issue(hosts, certValidity)
	if err != nil {
		return nil, err
	}
	// The API server's client certificate to the kubelet, for logs, exec
	// and port-forward.
	kubeletClient, err := ca.IssueClient("kube-apiserver-kubelet-client", []string{"system:masters"}, certValidity)
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		"apiserver.crt": serving.CertPEM, "apiserver.key": serving.KeyPEM,
		"apiserver-kubelet-client.crt": kubeletClient.CertPEM, "apiserver-kubelet-client.key": kubeletClient.KeyPEM,
	} {
		if err := write(name, data); err != nil {
			return nil, err
		}
	}
	if err := writeServiceAccountKey(pkiDir); err != nil {
		return nil, err
	}
	ids := map[string]struct {
		user   string
		groups []string
	}{"kubelet": {"system:node:" + nodeName, []string{"system:nodes"}}}
	for k, v := range identities {
		ids[k] = v
	}
	kubeconfigs = map[string]string{}
	for component, id := range ids {
		cert, err := ca.IssueClient(id.user, id.groups, certValidity)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(pkiDir, component+".kubeconfig")
		if err := writeKubeconfig(path, server, ca.CertPEM, id.user, cert); err != nil {
			return nil, err
		}
		kubeconfigs[component] = path
	}
	return kubeconfigs, nil
}

// writeServiceAccountKey writes the key pair that signs ServiceAccount
// tokens: sa.key (the API server signs, the controller-manager too) and
// sa.pub (the API server verifies).
func writeServiceAccountKey(pkiDir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate the ServiceAccount signing key: %w", err)
	}
	priv, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pkiDir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: priv}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pkiDir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

// writeKubeconfig writes a kubeconfig for user, authenticated by cert,
// trusting caPEM for server.
func writeKubeconfig(path, server string, caPEM []byte, user string, cert *certs.Serving) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["vigil-node"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert.CertPEM, ClientKeyData: cert.KeyPEM}
	cfg.Contexts["vigil-node"] = &clientcmdapi.Context{Cluster: "vigil-node", AuthInfo: user}
	cfg.CurrentContext = "vigil-node"
	return clientcmd.WriteToFile(*cfg, path)
}
