//go:build !windows

// Package lab builds a whole RunOS world in Linux network namespaces on one
// machine: control, two clusters of nodes each running a gateway and a web
// app, a LAN resolver, and laptops running the daemon. runos-lab and the
// end-to-end tests in e2e/ drive it; lab/README.md describes the topology.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// Options configure Up.
type Options struct {
	Dir        string        // the lab's directory (created; must be empty or absent)
	Clients    int           // laptops: client, client2…; 0 means 1
	SessionTTL time.Duration // control's --session-ttl; 0 means control's default (24h)
	// BinDir holds runos, runos-control, runos-gateway and runos-lab; ""
	// means the directory of the running executable.
	BinDir   string
	Logger   *slog.Logger // nil: discard
	Progress io.Writer    // one line per step; nil: discard
	Runner   Runner       // nil: ExecRunner
	Now      func() time.Time
	// Skip names programs not to start (control, gateway, webapp,
	// dnsmasq, vpnd): for tests of the lab itself.
	Skip []string
	// Metrics: control and every gateway serve Prometheus metrics, and
	// Debian's prometheus on the control host scrapes them (metrics.go).
	Metrics bool
	// Store is control's store: sqlite (the default) or postgres (Debian's
	// PostgreSQL on host db); ControlReplicas how many runos-control
	// replicas serve behind HAProxy at control's address (more than one
	// needs postgres).
	Store           string
	ControlReplicas int
	// ControlFlags are more of runos-control's flags, for every replica
	// (tests: a larger --max-devices-per-user).
	ControlFlags []string
	// RecordRelay has every gateway record its relay streams' bytes in
	// RelayRecordDir (what the relay sees, for the ciphertext-only test).
	RecordRelay bool
	// BlockUDP starts every laptop behind a network that lets no UDP
	// through to the nodes (Block with "udp").
	BlockUDP bool
	// LongPoll runs every daemon and gateway with --long-poll, as those
	// before push streams followed control.
	LongPoll bool
}

// Lab is a lab being built or running, rooted at its directory.
type Lab struct {
	dir          string
	bin          string
	names        Names
	topo         *Topology
	secrets      *Secrets
	ttl          time.Duration
	run          Runner
	log          *slog.Logger
	progress     io.Writer
	now          func() time.Time
	j            *journal
	env          *Env
	skip         []string
	metrics      bool
	controlFlags []string // Options.ControlFlags
	longPoll     bool

	recordRelay bool
}

// Programs the lab runs from BinDir.
var programs = []string{"runos", "runos-control", "runos-gateway", "runos-lab"}

// Tools the lab needs on PATH, with the Debian package that has each.
var tools = map[string]string{
	"ip": "iproute2", "unshare": "util-linux", "nsenter": "util-linux", "findmnt": "util-linux",
	"mount": "mount", "dnsmasq": "dnsmasq-base", "nft": "nftables",
	"wireguard-go": "wireguard-go", "wg": "wireguard-tools", // the clusters' internal networks
}

func (o *Options) fill() error {
	if o.Dir == "" {
		return errors.New("no lab directory given")
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	o.Dir = abs
	if o.Clients == 0 {
		o.Clients = 1
	}
	if o.BinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.BinDir = filepath.Dir(exe)
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Runner == nil {
		o.Runner = ExecRunner{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Store == "" {
		o.Store = StoreSQLite
	}
	if o.ControlReplicas == 0 {
		o.ControlReplicas = 1
	}
	if o.SessionTTL < 0 {
		return fmt.Errorf("--session-ttl %s: must not be negative", o.SessionTTL)
	}
	return nil
}

// CheckPrerequisites says what is missing to run a lab: root, tools on
// PATH (with the Debian package to install) and the project's programs.
func CheckPrerequisites(binDir string) error { return checkPrerequisites(binDir, nil, false) }

// programOf maps a program file to the lab's processes that run it.
var programOf = map[string][]string{
	"runos": {"vpnd"}, "runos-control": {"control"}, "runos-gateway": {"gateway"},
	"runos-lab": {"webapp", "kubedns", "kubeapi", "podapp", "idp"},
}

func checkPrerequisites(binDir string, skip []string, metrics bool) error {
	var missing []string
	if _, err := exec.LookPath("prometheus"); metrics && err != nil {
		missing = append(missing, "prometheus for --metrics (apt-get install prometheus)")
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces): run it with sudo")
	}
	names := make([]string, 0, len(tools))
	for t := range tools {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, t := range names {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, fmt.Sprintf("%s (apt-get install %s)", t, tools[t]))
		}
	}
	for _, p := range programs {
		if !slices.ContainsFunc(programOf[p], func(n string) bool { return !slices.Contains(skip, n) }) {
			continue
		}
		if st, err := os.Stat(filepath.Join(binDir, p)); err != nil || st.IsDir() {
			missing = append(missing, fmt.Sprintf("%s in %s (build it: make build)", p, binDir))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cannot build a lab, missing: %s", joinList(missing))
	}
	return nil
}

func joinList(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

// Up builds a lab and starts everything in it; it returns once control
// answers, every gateway reports, every web app, the LAN resolver and
// every daemon's socket answer, with D/env.json written. On failure it
// removes whatever it had made before returning the error.
func Up(ctx context.Context, o Options) (_ *Lab, err error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	if err := checkPrerequisites(o.BinDir, o.Skip, o.Metrics); err != nil {
		return nil, err
	}
	if err := claimDir(o.Dir); err != nil {
		return nil, err
	}
	topo, err := TopologyFor(o.Clients, o.Store, o.ControlReplicas)
	if err != nil {
		return nil, err
	}
	if err := checkReplicaTools(topo); err != nil {
		return nil, err
	}
	l := &Lab{dir: o.Dir, bin: o.BinDir, names: NamesFor(o.Dir), topo: topo, ttl: o.SessionTTL,
		run: o.Runner, log: o.Logger, progress: o.Progress, now: o.Now, skip: o.Skip, metrics: o.Metrics, controlFlags: o.ControlFlags,
		recordRelay: o.RecordRelay, longPoll: o.LongPoll}
	if l.j, err = newJournal(o.Dir, l.names.Prefix, o.Now()); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.step("up failed: %v; removing what was made", err)
			if derr := Down(context.WithoutCancel(ctx), o.Dir, DownOptions{Logger: o.Logger, Runner: o.Runner}); derr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, derr)
			}
		}
	}()
	if o.RecordRelay {
		if err := l.j.update(func(r *Record) { r.RecordRelay = true }); err != nil {
			return nil, err
		}
	}
	start := o.Now()
	l.step("lab %s in %s (%d hosts, %d laptop(s))", l.names.Prefix, o.Dir, len(topo.Hosts), o.Clients)
	if err := l.writeFiles(); err != nil {
		return nil, fmt.Errorf("write lab files: %w", err)
	}
	if l.metrics {
		if err := l.writePrometheusConfig(); err != nil {
			return nil, fmt.Errorf("write prometheus.yml: %w", err)
		}
	}
	l.step("network: switch %s with segments wan %s and lan %s", l.names.Switch(), wanPrefix, lanPrefix)
	if err := l.buildNetwork(ctx); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	l.step("mount namespaces: private /etc/resolv.conf, /run/wireguard, /run/runos per host")
	if err := l.buildMountNamespaces(ctx); err != nil {
		return nil, err
	}
	l.step("inside every cluster: internal network %s (WireGuard mesh, wireguard-go), pods %s, Services %s (nftables DNAT), kube-dns %s, API VIP %s",
		InsideNodeNetwork, InsidePodRange, InsideServiceRange, InsideDNS, InsideAPIVIP)
	if err := l.buildInside(ctx); err != nil {
		return nil, fmt.Errorf("inside: %w", err)
	}
	if topo.Store == StorePostgres {
		l.step("database: PostgreSQL cluster for host db in %s", l.pgHostDir())
		if err := l.initDatabase(ctx); err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
	}
	if err := l.startAll(ctx); err != nil {
		return nil, err
	}
	if o.BlockUDP {
		for _, h := range l.topo.Laptops() {
			if err := l.Block(ctx, h.Name, BlockUDP); err != nil {
				return nil, err
			}
			l.step("%s: UDP to the nodes blocked (nftables)", h.Name)
		}
	}
	if err := l.writeEnv(); err != nil {
		return nil, err
	}
	if err := l.j.update(func(r *Record) { r.Ready = true }); err != nil {
		return nil, err
	}
	l.step("ready in %s: %s", o.Now().Sub(start).Round(100*time.Millisecond), filepath.Join(o.Dir, EnvFile))
	return l, nil
}

// claimDir makes the lab directory, refusing one that holds a lab already
// or anything else (down removes what the lab made, so it must not share
// the directory with anything it did not make).
func claimDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == RecordFile {
			return fmt.Errorf("a lab is already in %s: remove it first with: runos-lab down --dir %s", dir, dir)
		}
	}
	if len(ents) > 0 {
		return fmt.Errorf("lab directory %s is not empty: give an empty or new directory", dir)
	}
	return nil
}

func (l *Lab) step(format string, args ...any) {
	fmt.Fprintf(l.progress, "lab: "+format+"\n", args...)
	l.log.Info(fmt.Sprintf(format, args...))
}

// Dir is the lab's directory.
func (l *Lab) Dir() string { return l.dir }

// Env is the lab's env.json.
func (l *Lab) Env() *Env { return l.env }

// Topology is the lab's topology.
func (l *Lab) Topology() *Topology { return l.topo }
