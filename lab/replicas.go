//go:build !windows

package lab

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runos/vpn/internal/pgserver"
)

// Control past one machine (runos-lab up --store postgres
// --control-replicas N): Debian's PostgreSQL on host db, with its data in
// the lab directory; N runos-control replicas on hosts control-1…, each on
// its own address, sharing that database; Debian's HAProxy on host control
// at control's address, the one URL every daemon, gateway and CLI uses. It
// re-terminates TLS with the lab's certificate, checks each replica over
// TLS with the lab's CA through GET /readyz, balances every request (so a
// device's long-polls land on any replica), holds requests up to 330 s
// (long-polls wait up to 300 s), retries a GET whose replica died before
// answering on another one, and logs every request with the replica that
// answered it (D/logs/control.haproxy.log).

// The database host's paths inside its mount namespace: D/hosts/db/pg is
// bind-mounted on /var/lib/postgresql there (the postgres user can reach
// it whatever the permissions of the lab directory's parents).
const (
	pgMount   = "/var/lib/postgresql"
	pgData    = pgMount + "/data"
	pgPort    = 5432
	pgDBName  = "postgres"
	pgSuperID = "postgres"
)

func (l *Lab) pgHostDir() string { return filepath.Join(l.hostDir("db"), "pg") }

// databaseURL is the replicas' store URL (with the database's password).
func (l *Lab) databaseURL() string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(pgSuperID, l.secrets.DBPassword),
		Host: net.JoinHostPort(l.topo.DBIP.String(), fmt.Sprint(pgPort)), Path: "/" + pgDBName,
		RawQuery: "sslmode=disable&connect_timeout=3"}
	return u.String()
}

func dbPassword(e *Env) string {
	if e.Database == nil {
		return ""
	}
	u, err := url.Parse(e.Database.URL)
	if err != nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}

// checkReplicaTools says what a lab with PostgreSQL or replicas lacks.
func checkReplicaTools(t *Topology) error {
	var missing []string
	if t.Store == StorePostgres {
		if _, err := pgserver.BinDir(); err != nil {
			missing = append(missing, "postgres (apt-get install postgresql)")
		} else if _, err := pgserver.PostgresAccount(); err != nil {
			missing = append(missing, "the postgres user (apt-get install postgresql)")
		}
		if _, err := exec.LookPath("setpriv"); err != nil {
			missing = append(missing, "setpriv (apt-get install util-linux)")
		}
	}
	if t.Replicas > 1 {
		if _, err := exec.LookPath("haproxy"); err != nil {
			missing = append(missing, "haproxy (apt-get install haproxy)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cannot build a lab with --store %s --control-replicas %d, missing: %s", t.Store, t.Replicas, joinList(missing))
	}
	return nil
}

// makeDatabaseDir makes D/hosts/db/pg, the postgres user's.
func (l *Lab) makeDatabaseDir() error {
	acct, err := pgserver.PostgresAccount()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(l.pgHostDir(), 0o700); err != nil {
		return err
	}
	return os.Chown(l.pgHostDir(), acct.UID, acct.GID)
}

// initDatabase makes the PostgreSQL cluster of host db, inside its mount
// namespace: password authentication over the network (the replicas'
// URL carries it), trust on the local socket.
func (l *Lab) initDatabase(ctx context.Context) error {
	bin, err := pgserver.BinDir()
	if err != nil {
		return err
	}
	acct, err := pgserver.PostgresAccount()
	if err != nil {
		return err
	}
	pw := filepath.Join(l.pgHostDir(), "pwfile")
	if err := os.WriteFile(pw, []byte(l.secrets.DBPassword+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Chown(pw, acct.UID, acct.GID); err != nil {
		return err
	}
	defer os.Remove(pw)
	argv := l.enter("db", pgserver.AsUser(acct, filepath.Join(bin, "initdb"), "-D", pgData, "-U", pgSuperID,
		"--pwfile", pgMount+"/pwfile", "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8")...)
	if _, err := l.run.Run(ctx, argv[0], argv[1:]...); err != nil {
		return err
	}
	hba := "# RunOS lab: the socket for the postgres user, passwords from the lab's networks\n" +
		"local all all trust\nhost all all 0.0.0.0/0 scram-sha-256\n"
	f := filepath.Join(l.pgHostDir(), "data", "pg_hba.conf")
	if err := os.WriteFile(f, []byte(hba), 0o600); err != nil {
		return err
	}
	return os.Chown(f, acct.UID, acct.GID)
}

// databaseProc is PostgreSQL on host db, in the foreground, as postgres.
func (l *Lab) databaseProc() Proc {
	bin, _ := pgserver.BinDir()
	acct, _ := pgserver.PostgresAccount()
	return Proc{Host: "db", Name: "postgres",
		Argv: pgserver.AsUser(acct, pgserver.ServerArgs(bin, pgData, pgMount, l.topo.DBIP.String(), pgPort, true)...)}
}

// controlProcs are runos-control on every control host: one on control
// (SQLite, or PostgreSQL), or one per replica. The store URL goes in the
// environment (RUNOS_STORE), not the command line, which the lab logs.
func (l *Lab) controlProcs() []Proc {
	var ps []Proc
	for _, h := range l.topo.ControlHosts() {
		argv := []string{filepath.Join(l.bin, "runos-control"),
			"--listen", h.Addrs[WAN].String() + ":443",
			"--tls-cert", filepath.Join(l.controlDir(), "cert.pem"),
			"--tls-key", filepath.Join(l.controlDir(), "key.pem"),
			"--seed", l.worldFile(),
			"--issuer", l.apiURL()}
		var env []string
		if l.topo.Store == StorePostgres {
			env = append(env, "RUNOS_STORE="+l.databaseURL())
		} else {
			argv = append(argv, "--db", filepath.Join(l.controlDir(), "control.db"))
		}
		if l.topo.Replicas > 1 {
			argv = append(argv, "--replica-name", h.Name, "--trusted-proxy", l.topo.ControlIP.String())
		}
		if l.ttl > 0 {
			argv = append(argv, "--session-ttl", l.ttl.String())
		}
		if l.metrics {
			argv = append(argv, "--metrics-addr", l.controlMetricsAddr(h.Name))
		}
		if l.hasIdP() {
			argv = append(argv, l.idpControlFlags()...)
			env = append(env, l.idpControlEnv()...)
		}
		argv = append(argv, l.controlFlags...)
		ps = append(ps, Proc{Host: h.Name, Name: "control", Argv: argv, Env: env})
	}
	return ps
}

func (l *Lab) haproxyConf() string { return filepath.Join(l.controlDir(), "haproxy.cfg") }
func (l *Lab) haproxyPEM() string  { return filepath.Join(l.controlDir(), "haproxy.pem") }
func (l *Lab) haproxySocket() string {
	return filepath.Join(l.hostDir("control"), "run", "haproxy.sock")
}

// BalancerLog is HAProxy's request log: one line per request, with the
// replica that answered it (see haproxyConfText's log-format).
func (l *Lab) BalancerLog() string { return filepath.Join(l.logDir(), "control.haproxy.log") }

func (l *Lab) balancerProc() Proc {
	return Proc{Host: "control", Name: "haproxy", Argv: []string{"haproxy", "-db", "-f", l.haproxyConf()}}
}

// haproxyConfText is HAProxy's configuration. Each replica is listed
// twice: checked through /readyz, and as a backup without a check, used
// only when no replica is ready (the database is down): then the replicas
// answer themselves, 503 "store unavailable", rather than HAProxy's page.
func (l *Lab) haproxyConfText() string {
	var b strings.Builder
	fmt.Fprintf(&b, `# RunOS lab: HAProxy in front of the runos-control replicas.
global
	log stdout format raw local0
	stats socket %s mode 600 level admin
	maxconn 8000

defaults
	mode http
	log global
	# accepted (s.ms), replica, status, ms idle before the request and in
	# all until its answer's end, retries, method, URI, RunOS-Replica
	log-format "%%Ts.%%ms srv=%%s status=%%ST ti=%%Ti tt=%%Tt rc=%%rc %%HM %%{+Q}HU hdr=%%hs"
	timeout connect 2s
	timeout client 330s
	timeout server 330s
	timeout http-request 10s
	timeout http-keep-alive 120s
	timeout queue 10s
	# A connection refused by a replica that died is tried again on the
	# next one at once (redispatch on every retry, not only the last), and
	# marks that replica down until its check passes (observe layer4): a
	# request sent in the second before the checks see a replica dead must
	# not fail on the dead ones in turn.
	retries 3
	option redispatch 1
	retry-on conn-failure empty-response response-timeout

frontend api
	bind %s:443 ssl crt %s alpn h2,http/1.1
	capture response header RunOS-Replica len 24
	# Only GETs (long-polls, reads) are re-sent to another replica when
	# theirs died before answering; a change is never sent twice.
	http-request disable-l7-retry unless METH_GET
	default_backend replicas

backend replicas
	balance roundrobin
	option forwardfor
	option allbackups
	option httpchk
	http-check send meth GET uri /readyz
	http-check expect status 200
	default-server ssl verify required ca-file %s verifyhost control.lab.runos inter 500ms fall 2 rise 1
`, l.haproxySocket(), l.topo.ControlIP, l.haproxyPEM(), l.caFile())
	for _, h := range l.topo.ControlHosts() {
		fmt.Fprintf(&b, "\tserver %s %s:443 check observe layer4 error-limit 1 on-error mark-down\n", h.Name, h.Addrs[WAN])
	}
	for _, h := range l.topo.ControlHosts() {
		fmt.Fprintf(&b, "\tserver %s-unready %s:443 backup\n", h.Name, h.Addrs[WAN])
	}
	return b.String()
}

// Balancer sends a command to HAProxy's admin socket (for example "set
// server replicas/control-2 state drain") and returns its answer.
func (l *Lab) Balancer(ctx context.Context, command string) (string, error) {
	if l.topo.Replicas <= 1 {
		return "", fmt.Errorf("this lab has one control and no balancer (runos-lab up --store postgres --control-replicas N)")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", l.haproxySocket())
	if err != nil {
		return "", fmt.Errorf("balancer: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	}
	if _, err := fmt.Fprintf(c, "%s\n", command); err != nil {
		return "", err
	}
	var out strings.Builder
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
	}
	return out.String(), nil
}

// Database connects to the lab's PostgreSQL as the replicas do (from host
// db's network), for tests that look at what the replicas share.
func (l *Lab) Database(ctx context.Context) (*pgx.Conn, error) {
	if l.topo.Store != StorePostgres {
		return nil, fmt.Errorf("this lab's control keeps SQLite (runos-lab up --store postgres)")
	}
	cfg, err := pgx.ParseConfig(l.databaseURL())
	if err != nil {
		return nil, err
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return l.Dial(ctx, "db", network, addr)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database on db: %w", err)
	}
	return c, nil
}

// databaseReady: the server accepts the replicas' password over the lab's
// network.
func (l *Lab) databaseReady(ctx context.Context) error {
	c, err := l.Database(ctx)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

// replicaReady: the replica answers GET /readyz 200 on its own address.
func (l *Lab) replicaReady(ctx context.Context, host string) error {
	h, _ := l.topo.Host(host)
	body, err := l.Get(ctx, host, "https://"+h.Addrs[WAN].String()+"/readyz")
	if err != nil {
		return fmt.Errorf("runos-control on %s: %v %s", host, err, strings.TrimSpace(body))
	}
	return nil
}
