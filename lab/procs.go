//go:build !windows

package lab

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/runos/vpn/platform"
)

// Proc is a program the lab runs on a host.
type Proc struct {
	Host string
	Name string // control, gateway, webapp, dnsmasq, vpnd, postgres, haproxy
	Argv []string
	Env  []string // KEY=VALUE on top of HostEnv, kept out of the log (secrets)
}

// procs is every program of the lab, in start order.
func (l *Lab) procs() []Proc {
	bin := func(p string) string { return filepath.Join(l.bin, p) }
	var ps []Proc
	ps = append(ps, Proc{Host: "lan", Name: "dnsmasq", Argv: []string{"dnsmasq", "--keep-in-foreground",
		"--conf-file=" + l.dnsmasqConf()}})
	if l.topo.Store == StorePostgres {
		ps = append(ps, l.databaseProc())
	}
	if l.hasIdP() { // before control, which asks it for its discovery document at start
		ps = append(ps, l.idpProc())
	}
	ps = append(ps, l.controlProcs()...)
	if l.topo.Replicas > 1 {
		ps = append(ps, l.balancerProc())
	}
	for _, c := range l.topo.Clusters {
		ps = append(ps, l.insideProcs(c)...)
	}
	for _, h := range l.topo.Hosts {
		if h.Kind != KindNode {
			continue
		}
		ps = append(ps,
			Proc{Host: h.Name, Name: "webapp", Argv: []string{bin("runos-lab"), "webapp",
				"--cluster", h.CID, "--node", h.NID, "--listen", ":80", "--tls-listen", ":443", "--domain", l.topo.Domain(h.CID),
				"--relay-upstream", relayUpstream, "--relay-cert", l.relayCert(h.Name), "--relay-key", l.relayKey(h.Name)}},
			Proc{Host: h.Name, Name: "gateway", Argv: l.gatewayArgv(h.Name)})
	}
	if l.metrics {
		ps = append(ps, l.prometheusProc())
	}
	for _, h := range l.topo.Laptops() {
		ps = append(ps, l.daemonProc(h.Name))
	}
	return ps
}

// relayUpstream is where a node's gateway serves the relay, behind the web
// app on 443 that stands in for Traefik (which routes the relay's path to
// it): plain HTTP on the node's loopback.
const relayUpstream = "127.0.0.1:8443"

// gatewayArgv is a node's runos-gateway command line: its relay behind the
// node's 443, as in production.
func (l *Lab) gatewayArgv(host string) []string {
	h, _ := l.topo.Host(host)
	argv := []string{filepath.Join(l.bin, "runos-gateway"),
		"--control", l.apiURL(), "--node-id", h.NID, "--token-file", l.tokenFile(host),
		"--state-dir", l.stateDir(host), "--ca-file", l.caFile(), "--relay-listen", relayUpstream}
	argv = append(argv, insideFlags()...)
	if l.recordRelay {
		argv = append(argv, "--relay-record", l.RelayRecordDir(host))
	}
	if l.metrics {
		argv = append(argv, "--metrics-addr", l.gatewayMetricsAddr(host))
	}
	if l.longPoll {
		argv = append(argv, "--long-poll")
	}
	return argv
}

// daemonProc is a laptop's daemon. Its state directory comes from the
// host's environment (RUNOS_VPND_STATE_DIR), as for every runos vpnd run
// there: `runos-lab exec client -- runos vpnd --cleanup` finds the same
// state as on a laptop.
func (l *Lab) daemonProc(host string) Proc {
	argv := []string{filepath.Join(l.bin, "runos"), "vpnd", "--socket", socketInside, "--ca-file", l.caFile()}
	if l.longPoll {
		argv = append(argv, "--long-poll")
	}
	return Proc{Host: host, Name: "vpnd", Argv: argv}
}

// HostEnv is the environment of everything run on a host: the machine's
// own, with the project's programs first on PATH and the RunOS variables
// pointing at this lab (docs/internals.md "Environment variables").
func (l *Lab) HostEnv(host string) []string {
	set := map[string]string{
		"PATH":              l.bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":              l.homeDir(host),
		"XDG_CONFIG_HOME":   filepath.Join(l.homeDir(host), ".config"),
		"RUNOS_API_URL":     l.apiURL(),
		"RUNOS_CA_FILE":     l.caFile(),
		"RUNOS_VPND_SOCKET": socketInside,
		"RUNOS_CONFIG":      l.configFile(host),
		"RUNOS_LAB_DIR":     l.dir,
		"RUNOS_LAB_HOST":    host,
		"WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD": "1",
	}
	if h, ok := l.topo.Host(host); ok && h.Kind == KindLaptop {
		set["BROWSER"] = l.browserScript(host)
		set[platform.EnvStateDir] = l.stateDir(host)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := set[k]; !ours && k != "BROWSER" && k != platform.EnvStateDir {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		env = append(env, k+"="+set[k])
	}
	return env
}

// Command returns a command that runs argv on a host (inside its network
// and mount namespaces) with HostEnv plus extra (KEY=VALUE entries that
// override it).
func (l *Lab) Command(ctx context.Context, host string, extra []string, argv ...string) (*exec.Cmd, error) {
	if _, ok := l.topo.Host(host); !ok {
		return nil, fmt.Errorf("no host %q in this lab (hosts: %s)", host, strings.Join(l.HostNames(), ", "))
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command to run on %s", host)
	}
	full := l.enter(host, argv...)
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Env = overrideEnv(l.HostEnv(host), extra)
	cmd.Dir = l.homeDir(host)
	return cmd, nil
}

// HostNames lists the hosts in order.
func (l *Lab) HostNames() []string {
	var ns []string
	for _, h := range l.topo.Hosts {
		ns = append(ns, h.Name)
	}
	return ns
}

func overrideEnv(env, extra []string) []string {
	if len(extra) == 0 {
		return env
	}
	keys := map[string]bool{}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return keys[k]
	})
	return append(out, extra...)
}

// Start starts one of the lab's programs in the background (its output
// appended to D/logs/<host>.<name>.log) and records its PID in lab.json at
// once. Should the lab die between the fork and the record, Down still
// finds the process: it also kills whatever runs in the lab's namespaces.
func (l *Lab) Start(p Proc) (ProcRecord, error) {
	logPath := filepath.Join(l.logDir(), p.Host+"."+p.Name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return ProcRecord{}, err
	}
	defer f.Close()
	full := l.enter(p.Host, p.Argv...)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = overrideEnv(l.HostEnv(p.Host), p.Env)
	cmd.Dir = l.homeDir(p.Host)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own session: a ^C at the terminal that ran `up` does not reach it,
	// and it outlives `up`.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	fmt.Fprintf(f, "--- %s: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.Argv, " "))
	if err := cmd.Start(); err != nil {
		return ProcRecord{}, fmt.Errorf("start %s on %s: %w", p.Name, p.Host, err)
	}
	rec := ProcRecord{Name: p.Name, Host: p.Host, PID: cmd.Process.Pid, Start: procStart(cmd.Process.Pid), Log: logPath}
	// Reap it when it exits, so a dead process is not a zombie that still
	// looks alive to Alive.
	go func() { _ = cmd.Wait() }()
	if err := l.j.proc(rec); err != nil {
		_ = cmd.Process.Kill()
		return ProcRecord{}, err
	}
	return rec, nil
}

// procStart reads a process's start time (clock ticks since boot), 0 if
// it is gone.
func procStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// Alive reports whether the recorded process still runs (same PID, same
// start time, not a zombie).
func (p ProcRecord) Alive() bool {
	return p.PID > 1 && p.Start != 0 && procStart(p.PID) == p.Start
}

// Proc returns the recorded process of that name on that host.
func (l *Lab) Proc(host, name string) (ProcRecord, bool) {
	for _, p := range l.j.snapshot().Procs {
		if p.Host == host && p.Name == name {
			return p, true
		}
	}
	return ProcRecord{}, false
}

// Stop sends sig to a recorded process, waits up to wait for it to exit
// (then kills it), and forgets it.
func (l *Lab) Stop(host, name string, sig syscall.Signal, wait time.Duration) error {
	p, ok := l.Proc(host, name)
	if !ok {
		return fmt.Errorf("no %s running on %s", name, host)
	}
	stopProc(p, sig, wait)
	if err := l.j.dropProc(p.PID); err != nil {
		return err
	}
	return l.writeEnv()
}

// StartAgain starts a stopped program as Restart does, without waiting
// for it to be ready: a gateway started while control is down is judged
// ready by control, so the caller watches what it needs instead.
func (l *Lab) StartAgain(host, name string) error {
	for _, p := range l.procs() {
		if p.Host == host && p.Name == name {
			if _, err := l.Start(p); err != nil {
				return err
			}
			return l.writeEnv()
		}
	}
	return fmt.Errorf("no program %s on host %s", name, host)
}

// Restart starts a host's program again with the arguments the lab gives
// it (after Stop), and waits until it is ready.
func (l *Lab) Restart(ctx context.Context, host, name string) error {
	return l.RestartWith(ctx, host, name, "")
}

// RestartWith is Restart with exe ("": the lab's) in place of the program's
// executable and env added to its environment: a test runs a build of its
// own (runosfault) with the arguments the lab gives the program.
func (l *Lab) RestartWith(ctx context.Context, host, name, exe string, env ...string) error {
	for _, p := range l.procs() {
		if p.Host == host && p.Name == name {
			if exe != "" {
				p.Argv = append([]string{exe}, p.Argv[1:]...)
			}
			p.Env = append(p.Env, env...)
			if _, err := l.Start(p); err != nil {
				return err
			}
			if err := l.writeEnv(); err != nil {
				return err
			}
			return l.waitProc(ctx, p)
		}
	}
	return fmt.Errorf("no program %s on host %s", name, host)
}

func stopProc(p ProcRecord, sig syscall.Signal, wait time.Duration) {
	if !p.Alive() {
		return
	}
	defer waitGone(p.PID, 5*time.Second)
	_ = syscall.Kill(p.PID, sig)
	deadline := time.Now().Add(wait)
	for p.Alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p.Alive() {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
		for i := 0; i < 100 && p.Alive(); i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitGone waits until every thread of a dead process has exited: the
// leader turns zombie first, and the process's files (a listening socket,
// a TUN device) close only when the last thread is gone.
func waitGone(pid int, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil || len(tasks) <= 1 && procStart(pid) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startAll starts every program and waits for each kind to be ready.
func (l *Lab) startAll(ctx context.Context) error {
	byName := map[string][]Proc{}
	var order []string
	for _, p := range l.procs() {
		if slices.Contains(l.skip, p.Name) {
			continue
		}
		if _, seen := byName[p.Name]; !seen {
			order = append(order, p.Name)
		}
		byName[p.Name] = append(byName[p.Name], p)
	}
	for _, name := range order {
		ps := byName[name]
		hosts := make([]string, 0, len(ps))
		for _, p := range ps {
			if _, err := l.Start(p); err != nil {
				return err
			}
			hosts = append(hosts, p.Host)
		}
		l.step("%s started on %s; waiting until ready", name, strings.Join(hosts, ", "))
		for _, p := range ps {
			if err := l.waitProc(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}
