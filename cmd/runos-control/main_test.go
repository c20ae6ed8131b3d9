package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBinary builds runos-control, starts it on plain HTTP with a world
// file, talks to it, and stops it with SIGTERM.
func TestBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "runos-control")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	world := `{"accounts":[{"aid":"rjwrn","operatorToken":"operator-token-0123456789"}],"users":[],
		"clusters":[{"cid":"ky3","aid":"rjwrn","name":"tc3-ky3","domainRoot":"example.com","nodes":[]}]}`
	os.WriteFile(filepath.Join(dir, "world.json"), []byte(world), 0o600)

	// Refusals come before anything is opened.
	out, err := exec.Command(bin, "--db", filepath.Join(dir, "c.db")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--tls-cert and --tls-key are required") {
		t.Fatalf("without TLS: %v %s", err, out)
	}
	out, _ = exec.Command(bin, "--help").CombinedOutput()
	for _, f := range []string{"--listen", "--tls-cert", "--insecure-http", "--db", "--seed", "--session-ttl", "--device-pool",
		"--service-pool", "--issuer", "--move-ready-timeout", "--move-deadline", "--heartbeat-timeout", "--log-level",
		"--store", "--replica-name", "--trusted-proxy"} {
		if !strings.Contains(string(out), f) {
			t.Errorf("--help lacks %s", f)
		}
	}

	cmd := exec.Command(bin, "--insecure-http", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "c.db"),
		"--seed", filepath.Join(dir, "world.json"), "--issuer", "http://127.0.0.1")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	listen := regexp.MustCompile(`runos-control serving" url=http://127.0.0.1 listen=(\S+)`)
	var addr string
	for addr == "" && sc.Scan() {
		t.Log(sc.Text())
		if m := listen.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatal("no serving line")
	}
	go io.Copy(io.Discard, stderr)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/clusters", nil)
	req.Header.Set("Authorization", "Bearer operator-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"cid":"ky3"`) {
		t.Fatalf("clusters: %d %s", resp.StatusCode, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not stop on SIGTERM")
	}
}
