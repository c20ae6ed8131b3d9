package installer

import (
	"path/filepath"
	"strings"
)

// systemd's own directories for the unit's RuntimeDirectory= and
// StateDirectory= (the daemon's defaults on Linux).
const (
	systemdRuntimeBase = "/run"
	systemdStateBase   = "/var/lib"
)

// systemdUnit renders the unit file kardianos/service installs (its
// SystemdScript option, used verbatim: there is no template in it).
//
// The hardening keeps what the daemon needs and nothing more: it makes a
// TUN device (CAP_NET_ADMIN, /dev/net/tun), sets addresses and routes
// (netlink), serves the DNS forwarder on port 53 of a loopback address
// (CAP_NET_BIND_SERVICE), talks to systemd-resolved over D-Bus (AF_UNIX) or
// rewrites resolv.conf (its directory writable), and keeps its state and
// socket in its own directories. /run/wireguard holds the UAPI socket that
// the stock wg tool reads; it is preserved on stop because other WireGuard
// programs keep their sockets there too.
func systemdUnit(s Spec) string {
	var b strings.Builder
	w := func(lines ...string) {
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	w("# Installed by `runos vpn install`; `runos vpn uninstall` removes it.",
		"[Unit]",
		"Description="+s.Description,
		"After=network-online.target nss-lookup.target",
		"Wants=network-online.target",
		"StartLimitIntervalSec=120",
		"StartLimitBurst=10",
		"",
		"[Service]",
		"Type=simple",
		"ExecStart="+systemdLine(append([]string{s.Binary}, s.DaemonArgs()...)),
		"ExecStopPost="+systemdLine(append([]string{s.Binary}, s.CleanupArgs()...)),
		"Restart=on-failure",
		"RestartSec=2s",
		"TimeoutStopSec=30s",
	)
	rw := []string{}
	runtimeDirs := []string{"wireguard"}
	if d := filepath.Dir(s.Socket); filepath.Dir(d) == systemdRuntimeBase {
		runtimeDirs = append([]string{filepath.Base(d)}, runtimeDirs...)
	} else {
		rw = append(rw, "-"+d)
	}
	w("RuntimeDirectory="+strings.Join(runtimeDirs, " "),
		"RuntimeDirectoryMode=0755",
		"RuntimeDirectoryPreserve=yes")
	if filepath.Dir(s.StateDir) == systemdStateBase {
		w("StateDirectory="+filepath.Base(s.StateDir), "StateDirectoryMode=0700")
	} else {
		rw = append(rw, s.StateDir)
	}
	rw = append(rw, s.ReadWritePaths...)
	w("UMask=0077",
		"CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_BIND_SERVICE CAP_NET_RAW",
		"AmbientCapabilities=CAP_NET_ADMIN CAP_NET_BIND_SERVICE CAP_NET_RAW",
		"NoNewPrivileges=yes",
		"DevicePolicy=closed",
		"DeviceAllow=/dev/net/tun rw",
		"ProtectSystem=strict",
	)
	if len(rw) > 0 {
		q := make([]string, len(rw))
		for i, p := range rw {
			q[i] = systemdQuote(p)
		}
		w("ReadWritePaths=" + strings.Join(q, " "))
	}
	w("ProtectHome=yes",
		"PrivateTmp=yes",
		"ProtectKernelTunables=yes",
		"ProtectKernelModules=yes",
		"ProtectKernelLogs=yes",
		"ProtectControlGroups=yes",
		"ProtectClock=yes",
		"ProtectHostname=yes",
		"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
		"RestrictNamespaces=yes",
		"RestrictRealtime=yes",
		"RestrictSUIDSGID=yes",
		"LockPersonality=yes",
		"MemoryDenyWriteExecute=yes",
		"SystemCallArchitectures=native",
		"SystemCallFilter=@system-service",
		"SystemCallErrorNumber=EPERM",
		"",
		"[Install]",
		"WantedBy=multi-user.target",
	)
	return b.String()
}

func systemdLine(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = systemdQuote(a)
	}
	return strings.Join(q, " ")
}

// systemdQuote makes s one word of a unit file's command line or path
// list: % starts a specifier and $ a variable there, so both are doubled,
// and a word with blanks, quotes or backslashes goes in double quotes.
func systemdQuote(s string) string {
	s = strings.NewReplacer("%", "%%", "$", "$$").Replace(s)
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
