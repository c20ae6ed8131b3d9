//go:build !windows

package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// DemoOptions configure Demo.
type DemoOptions struct {
	Keep   bool   // leave the lab up at the end
	BinDir string // "" means the running executable's directory
	Out    io.Writer
}

// Demo brings a lab up in a temporary directory and walks through RunOS
// VPN on its laptop, each step announced with the command as a user would
// type it and its real output. It removes the lab at the end unless Keep.
func Demo(ctx context.Context, o DemoOptions) (err error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	dir, err := os.MkdirTemp("", "runos-lab-demo-")
	if err != nil {
		return err
	}
	l, err := Up(ctx, Options{Dir: dir, BinDir: o.BinDir, Progress: o.Out})
	if err != nil {
		_ = os.Remove(dir)
		return err
	}
	d := &demo{l: l, out: o.Out, ctx: ctx}
	defer func() {
		if o.Keep {
			d.keepHelp()
			return
		}
		fmt.Fprintf(o.Out, "\n== Removing the lab (runos-lab down --dir %s)\n", dir)
		if derr := Down(context.WithoutCancel(ctx), dir, DownOptions{Progress: o.Out}); derr != nil && err == nil {
			err = derr
		}
	}()
	return d.walk()
}

type demo struct {
	l   *Lab
	out io.Writer
	ctx context.Context
	n   int
}

func (d *demo) walk() error {
	env := d.l.Env()
	ky3, _ := env.Cluster("ky3")
	fmt.Fprintf(d.out, `
RunOS VPN demo. The laptop "client" sits on a LAN (10.77.0.0/24) and the internet
(198.51.100.0/24). Cluster ky3 has nodes n1 (private ingress 10.77.0.21) and n2
(public 198.51.100.22); cluster xym has n1 (198.51.100.31). ky3's VPN server runs
on n1. Every command below runs on the laptop, as its user would type it.
`)
	steps := []struct {
		title string
		env   []string
		shown string // the command as shown, when it differs from argv
		argv  []string
	}{
		{title: "Make ky3 the default cluster", argv: []string{"runos", "config", "set", "cid", "ky3"}},
		{title: "Sign in (the browser opens the login page; the lab's scripted browser fills it) and connect ky3",
			argv: []string{"runos", "vpn", "up"}},
		{title: "The tunnel, the session and the live handshake", argv: []string{"runos", "vpn", "status"}},
		{title: "The stock WireGuard tool reads the same tunnel", argv: []string{"wg", "show", "wg1"}},
	}
	for _, s := range steps {
		if err := d.run(s.title, s.env, s.shown, s.argv...); err != nil {
			return err
		}
	}
	addr, err := d.serverAddress("ky3")
	if err != nil {
		return err
	}
	url := "http://" + addr + "/"
	if err := d.run("A page served on ky3's VPN node, through the tunnel ("+addr+" is ky3's VPN server address)",
		nil, "", "curl", "-sS", "--max-time", "10", url); err != nil {
		return err
	}
	if err := d.run("Split DNS: ky3's names resolve to its VPN address, other names as before (the LAN resolver)",
		nil, "", "getent", "hosts", "traefik."+ky3.Domain, "www.example.test"); err != nil {
		return err
	}
	if err := d.run("Reach another cluster too", nil, "", "runos", "vpn", "connect", "xym"); err != nil {
		return err
	}
	if err := d.run("Two clusters at once, each with its own subnet; both use the same internal ranges, so ky3 (the default) gets them raw and each its own mapped range",
		nil, "", "runos", "vpn", "status"); err != nil {
		return err
	}
	xym, _ := env.Cluster("xym")
	for _, c := range []*EnvCluster{ky3, xym} {
		svc := c.Services[0]
		if err := d.run(fmt.Sprintf("A Service inside %s, by its name (its pod runs on %s; no Ingress, no port-forward)", c.CID, svc.Node),
			nil, "", "curl", "-sS", "--max-time", "10", "http://"+svc.DNSName+"/"); err != nil {
			return err
		}
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		fmt.Fprintf(d.out, "\n(kubectl is not installed here: apt-get install kubernetes-client to see `kubectl get pods` over the VPN)\n")
	} else if err := d.run("kubectl with ky3's usual kubeconfig, through the tunnel to the API behind the VIP ("+ky3.APIName+")",
		nil, "kubectl --kubeconfig "+ky3.Kubeconfig+" get pods -A", "kubectl", "--kubeconfig", ky3.Kubeconfig, "get", "pods", "-A"); err != nil {
		return err
	}
	move := []string{"runos", "services", "wireguard", "move", ky3.VPNService.ID, "--cid", "ky3",
		"--target-node-id", "n2", "--follow"}
	if err := d.run("An operator moves ky3's VPN server from n1 to n2; the laptop follows by itself",
		[]string{"RUNOS_TOKEN=" + env.OperatorToken},
		"RUNOS_TOKEN=$(jq -r .operatorToken "+env.Dir+"/env.json) "+strings.Join(move, " "), move...); err != nil {
		return err
	}
	if err := d.run("The same address now reaches n2", nil, "", "curl", "-sS", "--max-time", "10", url); err != nil {
		return err
	}
	if err := d.run("The laptop's view after the move", nil, "", "runos", "vpn", "status"); err != nil {
		return err
	}
	if err := d.run("Stop reaching xym", nil, "", "runos", "vpn", "disconnect", "xym"); err != nil {
		return err
	}
	if err := d.run("Disconnect and end the session", nil, "", "runos", "vpn", "down"); err != nil {
		return err
	}
	return d.run("Signed out", nil, "", "runos", "vpn", "status")
}

// run announces a step, shows the command and runs it on the laptop with
// its output passed through.
func (d *demo) run(title string, extra []string, shown string, argv ...string) error {
	d.n++
	if shown == "" {
		shown = strings.Join(argv, " ")
	}
	fmt.Fprintf(d.out, "\n== %d. %s\n$ %s\n", d.n, title, shown)
	ctx, cancel := context.WithTimeout(d.ctx, 2*time.Minute)
	defer cancel()
	cmd, err := d.l.Command(ctx, "client", extra, argv...)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("demo step %d (%s): %w", d.n, shown, err)
	}
	return nil
}

// serverAddress reads a cluster's VPN server address from the laptop's
// daemon (what `runos vpn status --json` shows).
func (d *demo) serverAddress(cid string) (string, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	cmd, err := d.l.Command(ctx, "client", nil, "runos", "vpn", "status", "--json")
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	cmd.Stdout = &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("runos vpn status --json: %w", err)
	}
	var st localapi.Status
	if err := json.Unmarshal(buf.Bytes(), &st); err != nil {
		return "", fmt.Errorf("runos vpn status --json: %w", err)
	}
	for _, c := range st.Clusters {
		if c.CID == cid && c.Server.Address != "" {
			return c.Server.Address, nil
		}
	}
	return "", fmt.Errorf("runos vpn status shows no server address for %s", cid)
}

func (d *demo) keepHelp() {
	dir := d.l.Dir()
	fmt.Fprintf(d.out, `
== The lab is still running in %[1]s
Use it (as root):
  runos-lab exec --dir %[1]s client -- runos vpn up
  runos-lab exec --dir %[1]s client -- runos vpn status
  runos-lab exec --dir %[1]s client -- wg show wg1
  runos-lab exec --dir %[1]s ky3-n1 -- wg show wgvpn
  runos-lab status --dir %[1]s
Credentials and addresses: %[1]s/env.json
Remove it:
  runos-lab down --dir %[1]s
`, dir)
}
