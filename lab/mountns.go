//go:build !windows

package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Private mount points of every host: each host gets its own resolver
// settings, its own WireGuard UAPI sockets (wireguard-go puts them in
// /var/run/wireguard, shared by all network namespaces otherwise) and its
// own /run/runos (the daemon's default socket).
var privateMounts = []struct{ src, dst string }{
	{"resolv.conf", "/etc/resolv.conf"},
	{"wireguard", "/run/wireguard"},
	{"run", "/run/runos"},
}

// nsDir holds the persisted mount namespaces: a private bind mount of its
// own, because a namespace can be bind-mounted onto a file only where the
// mount is not shared.
func (l *Lab) nsDir() string { return filepath.Join(l.dir, "ns") }

// MountNSPath is the file that keeps a host's mount namespace alive.
func (l *Lab) MountNSPath(host string) string { return filepath.Join(l.nsDir(), host) }

func (l *Lab) hostDir(host string) string { return filepath.Join(l.dir, "hosts", host) }

// buildMountNamespaces gives every host a mount namespace of its own
// (unshare --mount=FILE keeps it after its first process exits), in which
// the private mounts above are bind mounts of the host's directory. Each
// one first drops its copies of namespace files (/run/netns/*, other labs'
// persisted namespaces) so it pins no namespace but its own.
func (l *Lab) buildMountNamespaces(ctx context.Context) error {
	d := l.nsDir()
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	if err := l.j.mount(d); err != nil {
		return err
	}
	if _, err := l.run.Run(ctx, "mount", "--bind", d, d); err != nil {
		return err
	}
	if _, err := l.run.Run(ctx, "mount", "--make-private", d); err != nil {
		return err
	}
	for _, m := range privateMounts {
		// The mount points must exist in the shared tree; they are plain
		// directories the system uses anyway.
		if m.dst != "/etc/resolv.conf" {
			if err := os.MkdirAll(m.dst, 0o755); err != nil {
				return err
			}
		}
	}
	for _, h := range l.topo.Hosts {
		f := l.MountNSPath(h.Name)
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			return err
		}
		if err := l.j.mount(f); err != nil {
			return err
		}
		var script strings.Builder
		script.WriteString("set -e\nfindmnt -rn -t nsfs -o TARGET | while read -r t; do umount -l \"$t\" 2>/dev/null || true; done\n")
		// An empty /run/netns, so that iproute2 inside the host does not
		// trip over the now unmounted namespace files.
		script.WriteString("if [ -d /run/netns ]; then mount -t tmpfs -o size=64k,mode=755 lab-netns /run/netns; fi\n")
		// /etc becomes an overlay of the machine's /etc before the
		// resolver is bind-mounted onto it: a bind mount on the machine's
		// own /etc/resolv.conf would be detached by the kernel as soon as
		// anything outside renamed a file over it (a package install, a
		// resolver manager, a daemon under test), and the host would then
		// read and write the machine's resolver. On the overlay the mount
		// point is this namespace's alone.
		up, work := filepath.Join(l.hostDir(h.Name), "etc-upper"), filepath.Join(l.hostDir(h.Name), "etc-work")
		for _, d := range []string{up, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		fmt.Fprintf(&script, "mount -t overlay lab-etc -o lowerdir=/etc,upperdir=%s,workdir=%s /etc\n", shQuote(up), shQuote(work))
		for _, m := range privateMounts {
			fmt.Fprintf(&script, "mount --bind %s %s\n", shQuote(filepath.Join(l.hostDir(h.Name), m.src)), m.dst)
		}
		if h.Kind == KindDatabase {
			// The database's files live in the lab directory; the server
			// sees them where the postgres user can reach them.
			if err := os.MkdirAll(pgMount, 0o755); err != nil {
				return err
			}
			fmt.Fprintf(&script, "mount --bind %s %s\n", shQuote(l.pgHostDir()), pgMount)
		}
		if _, err := l.run.Run(ctx, "unshare", "--mount="+f, "--propagation", "private",
			"sh", "-c", script.String()); err != nil {
			return fmt.Errorf("mount namespace of %s: %w", h.Name, err)
		}
	}
	return nil
}

// enter is the command prefix that runs argv inside a host's network and
// mount namespaces. nsenter opens both files before it enters either, so
// the network namespace file is found in the root mount namespace.
func (l *Lab) enter(host string, argv ...string) []string {
	return append([]string{"nsenter", "--mount=" + l.MountNSPath(host),
		"--net=" + netnsPath(l.names.Netns(host)), "--"}, argv...)
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
