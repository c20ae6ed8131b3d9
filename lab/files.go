//go:build !windows

package lab

import (
	"github.com/runos/vpn/internal/atomicfile"

	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Paths inside the lab directory.
func (l *Lab) caFile() string            { return filepath.Join(l.dir, "ca.pem") }
func (l *Lab) worldFile() string         { return filepath.Join(l.dir, "world.json") }
func (l *Lab) controlDir() string        { return filepath.Join(l.dir, "control") }
func (l *Lab) logDir() string            { return filepath.Join(l.dir, "logs") }
func (l *Lab) apiURL() string            { return "https://" + l.topo.ControlIP.String() }
func (l *Lab) stateDir(h string) string  { return filepath.Join(l.hostDir(h), "state") }
func (l *Lab) homeDir(h string) string   { return filepath.Join(l.hostDir(h), "home") }
func (l *Lab) tokenFile(h string) string { return filepath.Join(l.hostDir(h), "enrollment-token") }
func (l *Lab) relayCert(h string) string { return filepath.Join(l.hostDir(h), "relay-cert.pem") }
func (l *Lab) relayKey(h string) string  { return filepath.Join(l.hostDir(h), "relay-key.pem") }

// RelayRecordDir is where a node's gateway records its relay streams when
// the lab runs with Options.RecordRelay.
func (l *Lab) RelayRecordDir(h string) string { return filepath.Join(l.hostDir(h), "relay-record") }
func (l *Lab) browserScript(h string) string  { return filepath.Join(l.hostDir(h), "browser") }
func (l *Lab) configFile(h string) string {
	return filepath.Join(l.homeDir(h), ".config", "runos", "config.json")
}

// SocketPath is a laptop daemon's socket as seen from outside the lab: the
// same file is /run/runos/vpnd.sock inside the laptop.
func (l *Lab) SocketPath(h string) string { return filepath.Join(l.hostDir(h), "run", "vpnd.sock") }

// socketInside is the daemon's socket inside its laptop: the default path.
const socketInside = "/run/runos/vpnd.sock"

// writeFiles writes the CA, control's certificate, the world file with
// this lab's secrets, and every host's directory (resolv.conf, the private
// mount sources, state, tokens).
func (l *Lab) writeFiles() error {
	for _, f := range []string{"ca.pem", "world.json", "control", "hosts", "logs", "ns", EnvFile} {
		if err := l.j.file(f); err != nil {
			return err
		}
	}
	var replicaIPs []netip.Addr
	for _, h := range l.topo.ControlHosts() {
		replicaIPs = append(replicaIPs, h.Addrs[WAN])
	}
	pki, err := NewPKI(l.topo.ControlIP, l.now(), replicaIPs...)
	if err != nil {
		return err
	}
	if l.secrets, err = RandomSecrets(l.topo); err != nil {
		return err
	}
	w, err := json.MarshalIndent(l.topo.World(l.secrets), "", "  ")
	if err != nil {
		return err
	}
	for _, d := range []string{l.controlDir(), l.logDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	files := []struct {
		path string
		b    []byte
		mode os.FileMode
	}{
		{l.caFile(), pki.CAPEM, 0o644},
		{filepath.Join(l.controlDir(), "cert.pem"), pki.CertPEM, 0o644},
		{filepath.Join(l.controlDir(), "key.pem"), pki.KeyPEM, 0o600},
		{l.worldFile(), w, 0o600},
	}
	for _, h := range l.topo.Hosts {
		for _, d := range []string{"wireguard", "run"} {
			if err := os.MkdirAll(filepath.Join(l.hostDir(h.Name), d), 0o755); err != nil {
				return err
			}
		}
		for _, d := range []string{l.stateDir(h.Name), l.homeDir(h.Name)} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		if h.Kind == KindDatabase {
			if err := l.makeDatabaseDir(); err != nil {
				return err
			}
		}
		files = append(files, struct {
			path string
			b    []byte
			mode os.FileMode
		}{filepath.Join(l.hostDir(h.Name), "resolv.conf"), []byte(l.resolvConf(h)), 0o644})
		switch h.Kind {
		case KindNode:
			files = append(files, struct {
				path string
				b    []byte
				mode os.FileMode
			}{l.tokenFile(h.Name), []byte(l.secrets.EnrollmentTokens[h.Name] + "\n"), 0o600})
			// The relay's certificate on the node's 443, for its addresses.
			var ips []netip.Addr
			for _, a := range h.Addrs {
				ips = append(ips, a)
			}
			cert, key, err := pki.Leaf("runos-gateway relay "+h.Name+" (lab)", nil, ips)
			if err != nil {
				return fmt.Errorf("relay certificate of %s: %w", h.Name, err)
			}
			files = append(files, struct {
				path string
				b    []byte
				mode os.FileMode
			}{l.relayCert(h.Name), cert, 0o644}, struct {
				path string
				b    []byte
				mode os.FileMode
			}{l.relayKey(h.Name), key, 0o600})
		case KindLaptop:
			files = append(files, struct {
				path string
				b    []byte
				mode os.FileMode
			}{l.browserScript(h.Name), []byte(l.browserScriptText()), 0o755})
		case KindResolver:
			files = append(files, struct {
				path string
				b    []byte
				mode os.FileMode
			}{l.dnsmasqConf(), []byte(l.dnsmasqConfText()), 0o644})
		}
	}
	if l.topo.Replicas > 1 {
		files = append(files, struct {
			path string
			b    []byte
			mode os.FileMode
		}{l.haproxyConf(), []byte(l.haproxyConfText()), 0o600}, struct {
			path string
			b    []byte
			mode os.FileMode
		}{l.haproxyPEM(), append(append([]byte{}, pki.CertPEM...), pki.KeyPEM...), 0o600})
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.b, f.mode); err != nil {
			return err
		}
	}
	if err := l.writeIdPFiles(pki); err != nil {
		return err
	}
	return l.writeInsideFiles(pki)
}

// resolvConf is a host's /etc/resolv.conf: the LAN resolver for every host
// (only the laptops and ky3-n1 are on the LAN; for the others the lab's
// names simply do not resolve, and nothing leaks to the machine's own
// resolver).
func (l *Lab) resolvConf(h Host) string {
	return fmt.Sprintf("# RunOS lab host %s: the LAN resolver (dnsmasq on host lan)\nnameserver %s\n",
		h.Name, l.topo.ResolverIP)
}

// browserScriptText is $BROWSER on the laptops: one word (so any opener
// that appends the URL works) running the scripted browser.
func (l *Lab) browserScriptText() string {
	return fmt.Sprintf("#!/bin/sh\n# The lab's scripted browser: signs in as the lab's user through the login page.\nexec %s browser --dir %s \"$@\"\n",
		shQuote(filepath.Join(l.bin, "runos-lab")), shQuote(l.dir))
}

func (l *Lab) dnsmasqConf() string { return filepath.Join(l.hostDir("lan"), "dnsmasq.conf") }

// dnsmasqConfText configures the LAN resolver: it answers www.example.test
// and the clusters' public records, and nothing else. With no upstream
// servers it never recurses outward.
func (l *Lab) dnsmasqConfText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# RunOS lab LAN resolver: public DNS and the user's router, in one.\n")
	fmt.Fprintf(&b, "no-resolv\nno-hosts\nno-poll\nbind-interfaces\nlisten-address=%s\nlog-queries\nlog-facility=-\npid-file=\nuser=root\n", l.topo.ResolverIP)
	recs := l.topo.PublicRecords()
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		if strings.HasPrefix(name, "*.") {
			continue // address=/domain/ covers the domain and every name under it
		}
		fmt.Fprintf(&b, "address=/%s/%s\n", name, recs[name])
	}
	// Anything else is local (NXDOMAIN), never forwarded.
	b.WriteString("local=/#/\n")
	return b.String()
}

// writeEnv writes D/env.json from the topology, the secrets and the
// processes started so far.
func (l *Lab) writeEnv() error {
	t := l.topo
	e := &Env{
		Dir: l.dir, APIURL: l.apiURL(), CAFile: l.caFile(), User: t.User,
		Password: l.secrets.Password, OperatorToken: l.secrets.OperatorToken,
		DefaultCID: t.Clusters[0].CID, BinDir: l.bin, PrometheusURL: l.PrometheusURL(),
		Resolver: EnvResolver{Address: t.ResolverIP.String(), Records: map[string]string{}},
	}
	if l.ttl > 0 {
		e.SessionTTL = l.ttl.String()
	}
	e.Store, e.ControlReplicas = t.Store, t.Replicas
	if t.Replicas > 1 {
		for _, h := range t.ControlHosts() {
			e.Replicas = append(e.Replicas, EnvReplica{Host: h.Name, URL: "https://" + h.Addrs[WAN].String()})
		}
	}
	if t.Store == StorePostgres {
		e.Database = &EnvDatabase{Host: "db", URL: l.databaseURL()}
	}
	for name, a := range t.PublicRecords() {
		e.Resolver.Records[name] = a.String()
	}
	for _, c := range t.Clusters {
		ec := EnvCluster{CID: c.CID, AID: t.AID, Name: c.Name, Domain: t.Domain(c.CID),
			VPNService: EnvVPNService{ID: c.VPNID, Name: c.VPNName, NodeID: c.VPNNode, Port: 32768}}
		for _, n := range c.Nodes {
			h := NodeHost(c.CID, n.NID)
			ingress := n.PublicIP
			if n.IngressIP.IsValid() {
				ingress = n.IngressIP
			}
			ec.Nodes = append(ec.Nodes, EnvNode{NID: n.NID, Host: h, Netns: l.names.Netns(h),
				IngressIP: ingress.String(), PublicIP: n.PublicIP.String(), Published: n.Published,
				Roles: n.Roles})
		}
		l.insideEnv(c, &ec)
		e.Clusters = append(e.Clusters, ec)
	}
	rec := l.j.snapshot()
	for _, h := range t.Hosts {
		eh := EnvHost{Name: h.Name, Netns: l.names.Netns(h.Name), MountNS: l.MountNSPath(h.Name),
			Addresses: map[string]string{}}
		for seg, a := range h.Addrs {
			eh.Addresses[seg] = a.String()
		}
		for _, p := range rec.Procs {
			if p.Host == h.Name {
				eh.Processes = append(eh.Processes, EnvProcess{Name: p.Name, PID: p.PID, Log: p.Log})
			}
		}
		e.Hosts = append(e.Hosts, eh)
		if h.Kind == KindLaptop {
			e.Clients = append(e.Clients, EnvClient{Host: h.Name, Netns: l.names.Netns(h.Name),
				Socket: l.SocketPath(h.Name), Config: l.configFile(h.Name), Home: l.homeDir(h.Name)})
		}
	}
	e.Client = e.Clients[0]
	l.idpEnv(e)
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	l.env = e
	return atomicfile.WriteFile(filepath.Join(l.dir, EnvFile), b, 0o600)
}
