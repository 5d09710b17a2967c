// Command certs writes the key material and kubeconfigs one test control
// plane run needs into a directory: a CA, the API server's serving
// certificate (valid for loopback, the in-cluster service names and, with
// --advertise-ip, the address pods reach it on), the service-account signing
// key pair, the front-proxy CA and client certificate for API aggregation, and
// a client certificate plus kubeconfig for the admin, the controller manager
// and the scheduler; with --node NAME also for that node's kubelet and its
// kube-proxy.
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity is long enough for any run and short enough that a leaked
// directory is useless soon; every run makes fresh material anyway.
const validity = 7 * 24 * time.Hour

func main() {
	dir := flag.String("dir", "", "output directory (required)")
	server := flag.String("server", "https://127.0.0.1:6443", "API server URL written into the kubeconfigs")
	serviceIP := flag.String("service-ip", "10.0.0.1", "cluster IP of the kubernetes service, for the serving certificate")
	advertiseIP := flag.String("advertise-ip", "", "the API server's address on the node network, for the serving certificate (optional)")
	node := flag.String("node", "", "a real node's name: also write node.kubeconfig (its kubelet) and kube-proxy.kubeconfig (optional)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("certs: --dir is required")
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, text := range []string{*serviceIP, *advertiseIP} {
		if text == "" {
			continue
		}
		ip := net.ParseIP(text)
		if ip == nil {
			log.Fatalf("certs: %q is not an IP address", text)
		}
		ips = append(ips, ip)
	}
	if err := writeAll(*dir, *server, ips, *node); err != nil {
		log.Fatalf("certs: %v", err)
	}
}

// clientIdentity is a client certificate's user (CN) and groups (O).
type clientIdentity struct {
	file   string
	user   string
	groups []string
}

func writeAll(dir, server string, servingIPs []net.IP, node string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	ca, err := newCA("realcluster-ca")
	if err != nil {
		return err
	}
	if err := ca.write(dir, "ca"); err != nil {
		return err
	}

	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: servingIPs,
	}
	if err := ca.issue(dir, "apiserver", serving); err != nil {
		return err
	}

	if err := writeServiceAccountKeys(dir); err != nil {
		return err
	}

	// The API server proves itself to aggregated API servers with this client
	// certificate, and the controller manager and scheduler read its CA from
	// kube-system/extension-apiserver-authentication to trust such requests.
	frontProxyCA, err := newCA("realcluster-front-proxy-ca")
	if err != nil {
		return err
	}
	if err := frontProxyCA.write(dir, "front-proxy-ca"); err != nil {
		return err
	}
	frontProxyClient := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "front-proxy-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := frontProxyCA.issue(dir, "front-proxy-client", frontProxyClient); err != nil {
		return err
	}

	clients := []clientIdentity{
		{file: "admin", user: "kubernetes-admin", groups: []string{"system:masters"}},
		{file: "controller-manager", user: "system:kube-controller-manager"},
		{file: "scheduler", user: "system:kube-scheduler"},
	}
	if node != "" {
		// The Node authorizer and NodeRestriction know a kubelet by this user and
		// group; the default RBAC binds system:node-proxier to system:kube-proxy.
		clients = append(clients,
			clientIdentity{file: "node", user: "system:node:" + node, groups: []string{"system:nodes"}},
			clientIdentity{file: "kube-proxy", user: "system:kube-proxy"},
		)
	}
	for _, client := range clients {
		template := &x509.Certificate{
			Subject:     pkix.Name{CommonName: client.user, Organization: client.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := ca.issue(dir, client.file, template); err != nil {
			return err
		}
		if err := writeKubeconfig(dir, client.file, client.user, server); err != nil {
			return err
		}
	}
	return nil
}

type authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
}

func newCA(name string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the %s key: %w", name, err)
	}
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if err := stamp(template); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-signing %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the %s certificate: %w", name, err)
	}
	return &authority{cert: cert, certPEM: pemBlock("CERTIFICATE", der), key: key}, nil
}

// stamp gives a template a random serial number and the run's validity window.
func stamp(template *x509.Certificate) error {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return fmt.Errorf("drawing a serial number: %w", err)
	}
	template.SerialNumber = serial
	// Backdated a little so a clock a few seconds behind still accepts it.
	template.NotBefore = time.Now().Add(-5 * time.Minute)
	template.NotAfter = template.NotBefore.Add(validity)
	return nil
}

func (ca *authority) write(dir, name string) error {
	keyPEM, err := privateKeyPEM(ca.key)
	if err != nil {
		return fmt.Errorf("%s key: %w", name, err)
	}
	return writePair(dir, name, ca.certPEM, keyPEM)
}

// issue signs template with a fresh key and writes NAME.crt and NAME.key.
func (ca *authority) issue(dir, name string, template *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the %s key: %w", name, err)
	}
	if err := stamp(template); err != nil {
		return err
	}
	// ECDSA keys sign (TLS handshakes); they never encipher keys.
	template.KeyUsage = x509.KeyUsageDigitalSignature
	template.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, key.Public(), ca.key)
	if err != nil {
		return fmt.Errorf("signing the %s certificate: %w", name, err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return fmt.Errorf("%s key: %w", name, err)
	}
	return writePair(dir, name, pemBlock("CERTIFICATE", der), keyPEM)
}

// writeServiceAccountKeys writes sa.key (the API server signs tokens with it)
// and sa.pub (the API server verifies tokens with it). RSA because every
// token consumer accepts RS256.
func writeServiceAccountKeys(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating the service-account key: %w", err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	publicDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("encoding the service-account public key: %w", err)
	}
	if err := writeFile(dir, "sa.key", keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(dir, "sa.pub", pemBlock("PUBLIC KEY", publicDER), 0o644)
}

func writeKubeconfig(dir, name, user, server string) error {
	cert, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return fmt.Errorf("reading back %s.crt: %w", name, err)
	}
	key, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return fmt.Errorf("reading back %s.key: %w", name, err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return fmt.Errorf("reading back ca.crt: %w", err)
	}
	encode := base64.StdEncoding.EncodeToString
	// Plain text rather than client-go's clientcmd: the format is small and
	// stable, and this keeps the tool free of Kubernetes dependencies.
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: realcluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: realcluster
  context:
    cluster: realcluster
    user: %s
current-context: realcluster
`, server, encode(caPEM), user, encode(cert), encode(key), user)
	return writeFile(dir, name+".kubeconfig", []byte(config), 0o600)
}

func writePair(dir, name string, certPEM, keyPEM []byte) error {
	if err := writeFile(dir, name+".crt", certPEM, 0o644); err != nil {
		return err
	}
	return writeFile(dir, name+".key", keyPEM, 0o600)
}

func privateKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding as PKCS#8: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func writeFile(dir, name string, data []byte, mode os.FileMode) error {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
