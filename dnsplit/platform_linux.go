package dnsplit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/runos/vpn/platform"
)

// newPlatform picks between systemd-resolved and the resolv.conf forwarder.
func newPlatform(opt Options) (Configurator, string, string, error) {
	j, err := openJournal(opt.StateDir)
	if err != nil {
		return nil, "", "", err
	}
	if opt.InterfaceIndex == nil {
		opt.InterfaceIndex = kernelIndex
	}
	if opt.InterfaceAddr == nil {
		opt.InterfaceAddr = kernelAddr
	}
	dial := func() (Resolved, error) {
		if opt.Resolved != nil {
			return opt.Resolved, nil
		}
		return dialResolved()
	}
	switch opt.Mode {
	case ModeOff:
		r := "split DNS turned off by configuration"
		return newOff(r), ModeOff, r, nil
	case ModeResolvConf:
		r := "resolv.conf mode chosen by configuration"
		return newResolvConfMode(opt, j, r), ModeResolvConf, r, nil
	case ModeResolved:
		res, err := dial()
		if err == nil {
			err = pingResolved(res)
		}
		if err != nil {
			return nil, "", "", fmt.Errorf("dns: systemd-resolved mode asked for, but %s does not answer: %w", resolve1Name, err)
		}
		r := "systemd-resolved mode chosen by configuration"
		return newResolvedMode(opt, j, res, r), ModeResolved, r, nil
	case "":
	default:
		return nil, "", "", fmt.Errorf("dns: mode %q does not exist on Linux (choose %s, %s or %s)", opt.Mode, ModeResolved, ModeResolvConf, ModeOff)
	}

	var res Resolved
	probe := func() error {
		var err error
		if res, err = dial(); err != nil {
			return err
		}
		return pingResolved(res)
	}
	mode, reason := decideLinux(linuxFactsOf(opt.ResolvConf), opt.ListenAddr.String(), probe)
	if mode == ModeResolved {
		return newResolvedMode(opt, j, res, reason), mode, reason, nil
	}
	if res != nil {
		res.Close()
	}
	return newResolvConfMode(opt, j, reason), mode, reason, nil
}

func pingResolved(r Resolved) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return r.Ping(ctx)
}

// linuxFacts is what the choice of mode rests on.
type linuxFacts struct {
	path        string
	rc          resolvConf
	readErr     error
	symlink     string // resolv.conf links here
	resolvedDir bool   // /run/systemd/resolve exists
}

func linuxFactsOf(path string) linuxFacts {
	f := linuxFacts{path: path}
	b, err := os.ReadFile(path)
	f.readErr = err
	f.rc = parseResolvConf(b)
	f.symlink, _ = os.Readlink(path)
	_, err = os.Stat("/run/systemd/resolve")
	f.resolvedDir = err == nil
	return f
}

// decideLinux chooses the mode. systemd-resolved is used only when it really
// manages DNS: resolv.conf sends queries to its stub and it answers on the
// bus. A resolved that runs while resolv.conf lists other servers (or
// points at resolved's non-stub file of upstreams) would not see glibc's
// queries, so per-link settings there would do nothing: that is the usual
// misdetection, and the forwarder is the right tool then.
func decideLinux(f linuxFacts, listen string, probe func() error) (mode, reason string) {
	fwd := fmt.Sprintf("fronting it with the built-in forwarder on %s", listen)
	switch {
	case errors.Is(f.readErr, fs.ErrNotExist):
		return ModeResolvConf, fmt.Sprintf("%s does not exist (so glibc asks 127.0.0.1): %s", f.path, fwd)
	case f.readErr != nil:
		return ModeResolvConf, fmt.Sprintf("%s cannot be read (%v): %s", f.path, f.readErr, fwd)
	case f.rc.usesStub():
		if err := probe(); err != nil {
			return ModeResolvConf, fmt.Sprintf("%s points at the systemd-resolved stub 127.0.0.53 but %s does not answer on the system bus (%v): %s",
				f.path, resolve1Name, err, fwd)
		}
		how := "points at its stub 127.0.0.53"
		if f.symlink != "" {
			how = "links to " + f.symlink
		}
		return ModeResolved, fmt.Sprintf("systemd-resolved manages DNS (%s %s, %s answers on the system bus): per-link DNS on the tunnel",
			f.path, how, resolve1Name)
	}
	ns := "no nameserver"
	if len(f.rc.nameservers) > 0 {
		var ss []string
		for _, a := range f.rc.nameservers {
			ss = append(ss, a.String())
		}
		ns = strings.Join(ss, " ")
	}
	also := ""
	if f.resolvedDir {
		also = " (systemd-resolved may run, but glibc does not ask it)"
	}
	return ModeResolvConf, fmt.Sprintf("%s lists %s, not the systemd-resolved stub%s: %s", f.path, ns, also, fwd)
}

func kernelIndex(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}

// kernelAddr is the interface's first IPv4 address, else its first global
// IPv6 one: the device's tunnel address on wg1.
func kernelAddr(name string) (netip.Addr, error) {
	ps, err := platform.InterfaceAddrs(name)
	if err != nil {
		return netip.Addr{}, err
	}
	var v6 netip.Addr
	for _, p := range ps {
		switch a := p.Addr(); {
		case a.Is4():
			return a, nil
		case !v6.IsValid() && a.IsGlobalUnicast():
			v6 = a
		}
	}
	if v6.IsValid() {
		return v6, nil
	}
	return netip.Addr{}, fmt.Errorf("%s has no address", name)
}

// platformUndoers are Cleanup's tools on Linux.
func platformUndoers(log *slog.Logger) map[string]undoer {
	return map[string]undoer{
		kindResolvConf:   undoResolvConf,
		kindResolvedLink: func(c change) error { return revertRecordedLink(c, log) },
		kindResolverFile: removeResolverFile,
	}
}

// revertRecordedLink reverts a link left configured by a crashed daemon. A
// resolved that is not running, or a link that is gone (or is another
// interface now that its index was reused), leaves nothing to undo:
// resolved's per-link settings live only as long as both do.
func revertRecordedLink(c change, log *slog.Logger) error {
	ifi, err := net.InterfaceByIndex(c.Index)
	if err != nil || ifi.Name != c.Interface {
		log.Info("dns: recorded tunnel link is gone; systemd-resolved dropped its settings with it", "interface", c.Interface)
		return nil
	}
	r, err := dialResolved()
	if err != nil {
		log.Info("dns: no system bus; nothing to revert in systemd-resolved", "err", err)
		return nil
	}
	defer r.Close()
	if err := pingResolved(r); err != nil {
		log.Info("dns: systemd-resolved not running; nothing to revert", "err", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), busTimeout)
	defer cancel()
	if err := r.RevertLink(ctx, c.Index); err != nil {
		return err
	}
	_ = r.FlushCaches(ctx)
	return nil
}
