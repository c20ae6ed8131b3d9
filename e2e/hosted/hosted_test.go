//go:build darwin || windows

package hosted

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth/formlogin"
)

const (
	user, password = "hosted@example.com", "hosted-e2e-password"
	controlAddr    = "127.0.0.1:8443"
	domain         = "c1.a1.hosted.test" // <cid>.<aid>.<domainRoot>
)

var deviceLine = regexp.MustCompile(`To sign in, visit (\S+) and enter the code (\S+)`)

func TestHostedConnect(t *testing.T) {
	bin := os.Getenv("RUNOS_HOSTED_BIN")
	if os.Getenv("RUNOS_HOSTED_E2E") != "1" || bin == "" {
		t.Skip("the hosted runners' test: set RUNOS_HOSTED_E2E=1 and RUNOS_HOSTED_BIN")
	}
	dir := t.TempDir()
	ca, hc := writePKI(t, dir)
	world := api.World{
		Accounts: []api.WorldAccount{{AID: "a1"}},
		Users:    []api.WorldUser{{Email: user, Password: password, Accounts: []string{"a1"}}},
		Clusters: []api.WorldCluster{{CID: "c1", AID: "a1", Name: "hosted", DomainRoot: "hosted.test", IsConfigured: true,
			Nodes:      []api.WorldNode{{NID: "n1", Name: "n1", Roles: []string{"control-plane"}, IngressIP: "127.0.0.1", PublicIP: "127.0.0.1", Published: true, EnrollmentToken: "hosted-node-token"}},
			VPNService: &api.WorldVPNService{ID: "vpn1", Name: "vpn", NodeID: "n1"}}},
	}
	b, _ := json.Marshal(world)
	write(t, filepath.Join(dir, "world.json"), string(b))
	write(t, filepath.Join(dir, "token"), "hosted-node-token")

	start(t, filepath.Join(bin, program("runos-control")), "--listen", controlAddr, "--issuer", "https://"+controlAddr,
		"--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"),
		"--seed", filepath.Join(dir, "world.json"), "--store", "sqlite:"+filepath.Join(dir, "control.db"))
	startAdmin(t, filepath.Join(bin, program("runos-gateway")), "--control", "https://"+controlAddr, "--node-id", "n1",
		"--token-file", filepath.Join(dir, "token"), "--state-dir", filepath.Join(dir, "gateway"), "--ca-file", ca,
		"--interface", gatewayInterface)

	runos := filepath.Join(bin, program("runos"))
	before := dnsConfig(t)
	admin(t, runos, "vpn", "install", "--ca-file", ca)
	t.Cleanup(func() { adminQuiet(runos, "vpn", "uninstall", "--purge") })
	env := append(os.Environ(), "RUNOS_API_URL=https://"+controlAddr, "RUNOS_CA_FILE="+ca)

	// Sign in with the device code, approved through the login page.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	up := exec.CommandContext(ctx, runos, "vpn", "up", "--no-browser", "--cid", "c1")
	up.Env = env
	out, err := up.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		said.WriteString(sc.Text() + "\n")
		if m := deviceLine.FindStringSubmatch(sc.Text()); m != nil {
			if _, err := formlogin.Login(ctx, hc, m[1]+"?"+url.Values{"user_code": {m[2]}}.Encode(), user, password); err != nil {
				t.Fatalf("approve the code: %v", err)
			}
		}
	}
	if err := up.Wait(); err != nil {
		t.Fatalf("runos vpn up: %v\n%s", err, said.String())
	}

	if got := dnsConfig(t); !strings.Contains(got, domain) {
		t.Errorf("connected, but the system's DNS has no rule for %s:\n%s", domain, got)
	}
	down := exec.Command(runos, "vpn", "down")
	down.Env = env
	if b, err := down.CombinedOutput(); err != nil {
		t.Fatalf("runos vpn down: %v\n%s", err, b)
	}
	if got := dnsConfig(t); strings.Contains(got, domain) || got != before {
		t.Errorf("after vpn down the system's DNS is not as before:\n--- before\n%s\n--- after\n%s", before, got)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// start runs a program for the test's length, waiting for nothing: the
// steps after it wait for what they need (control answering, the gateway
// ready) through runos itself.
func start(t *testing.T, argv ...string) {
	t.Helper()
	startCmd(t, exec.Command(argv[0], argv[1:]...))
}

func startCmd(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(cmd.Path)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		stop(cmd)
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("--- %s:\n%s", cmd.Path, b)
		}
	})
}

func admin(t *testing.T, argv ...string) {
	t.Helper()
	if b, err := adminCommand(argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, b)
	}
}

func adminQuiet(argv ...string) { _ = adminCommand(argv...).Run() }

func startAdmin(t *testing.T, argv ...string) { t.Helper(); startCmd(t, adminCommand(argv...)) }

// writePKI makes a CA and control's certificate for 127.0.0.1, and an
// HTTP client trusting it.
func writePKI(t *testing.T, dir string) (caFile string, hc *http.Client) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "RunOS hosted e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	caFile = filepath.Join(dir, "ca.pem")
	write(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	write(t, filepath.Join(dir, "cert.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	write(t, filepath.Join(dir, "key.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return caFile, &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}
