//go:build !windows

package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DownOptions configure Down.
type DownOptions struct {
	Logger   *slog.Logger
	Progress io.Writer
	Runner   Runner
	// StopWait is how long programs get to exit after SIGTERM (they undo
	// their interfaces, routes and DNS) before SIGKILL. 0 means 5 s.
	StopWait time.Duration
}

// Down removes everything the lab in dir made: its processes (by recorded
// PID, then anything still running in its namespaces), its mounts, its
// namespaces and its files. It works from lab.json, which up writes before
// it makes anything, so it also undoes an up that died halfway; it is safe
// to run twice (a directory with no lab is not an error).
func Down(ctx context.Context, dir string, o DownOptions) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Runner == nil {
		o.Runner = ExecRunner{}
	}
	if o.StopWait == 0 {
		o.StopWait = 5 * time.Second
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	rec, err := LoadRecord(abs)
	if err != nil {
		return fmt.Errorf("down %s: %w", abs, err)
	}
	names := NamesFor(abs)
	if rec == nil {
		rec = &Record{Dir: abs, Prefix: names.Prefix}
	}
	say := func(format string, args ...any) {
		fmt.Fprintf(o.Progress, "lab: "+format+"\n", args...)
		o.Logger.Info(fmt.Sprintf(format, args...))
	}
	var errs []error

	// 1. Processes: TERM all at once (daemons and gateways take their
	// interfaces down), KILL whatever is left after StopWait.
	if len(rec.Procs) > 0 {
		say("stopping %d process(es)", len(rec.Procs))
	}
	var wg sync.WaitGroup
	for _, p := range slices.Backward(rec.Procs) {
		wg.Add(1)
		go func() { defer wg.Done(); stopProc(p, syscall.SIGTERM, o.StopWait) }()
	}
	wg.Wait()

	// The lab's namespaces: those recorded and any other with its prefix
	// (a crash between creating one and recording it cannot happen, since
	// the record comes first, but a hand-made leftover costs nothing).
	nss := slices.Clone(rec.Netns)
	if out, err := o.Runner.Run(ctx, "ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && strings.HasPrefix(f[0], names.Prefix+"-") && !slices.Contains(nss, f[0]) {
				nss = append(nss, f[0])
			}
		}
	}
	// 2. Anything else still running inside them (a process forked before
	// its PID was recorded, a command started with exec).
	for _, ns := range nss {
		out, err := o.Runner.Run(ctx, "ip", "netns", "pids", ns)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(out) {
			// Never this process: `ip netns pids` names a process by its
			// main thread's namespace, and a test in this process may be
			// dialling into the lab (dialIn) from a thread that entered
			// it, the main thread among them. Killing "anything inside"
			// then killed the test itself (e2e: "signal: killed").
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}

	// 3. Mounts, innermost first: those recorded, then any other still
	// under the lab directory.
	mounts := slices.Clone(rec.Mounts)
	for _, m := range mountsUnder(abs) {
		if !slices.Contains(mounts, m) {
			mounts = append(mounts, m)
		}
	}
	for _, m := range slices.Backward(mounts) {
		if err := unmount(ctx, o.Runner, m); err != nil {
			errs = append(errs, err)
		}
	}

	// 4. Namespaces (their veth pairs and bridges go with them).
	if len(nss) > 0 {
		say("removing %d network namespace(s)", len(nss))
	}
	for _, ns := range slices.Backward(nss) {
		if _, err := os.Stat(netnsPath(ns)); err != nil {
			continue
		}
		if _, err := o.Runner.Run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}

	// 5. Files the lab made, then the directory if nothing else is in it.
	for _, f := range rec.Files {
		if f == RecordFile {
			continue // last, so a failed down can run again
		}
		if err := os.RemoveAll(filepath.Join(abs, f)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.Remove(filepath.Join(abs, RecordFile)); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
		// A write of the record that an up killed halfway left its
		// temporary file (internal/atomicfile): the lab's too.
		tmps, _ := filepath.Glob(filepath.Join(abs, "."+RecordFile+".tmp*"))
		for _, t := range tmps {
			_ = os.Remove(t)
		}
		if ents, err := os.ReadDir(abs); err == nil && len(ents) == 0 {
			_ = os.Remove(abs)
		}
		say("removed the lab in %s", abs)
	}
	return errors.Join(errs...)
}

// unmount removes a mount if it is one; a path that is not (or no longer)
// mounted is fine.
func unmount(ctx context.Context, r Runner, path string) error {
	for i := 0; i < 10; i++ {
		mounted, err := isMountPoint(path)
		if err != nil || !mounted {
			return nil
		}
		if _, err := r.Run(ctx, "umount", path); err != nil {
			if i == 9 {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// mountsUnder lists the mount points below dir, outermost first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var ms []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			if m := unescapeMount(f[4]); strings.HasPrefix(m, dir+"/") && !slices.Contains(ms, m) {
				ms = append(ms, m)
			}
		}
	}
	slices.SortStableFunc(ms, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	return ms
}

// isMountPoint reports whether path is a mount point in our mount
// namespace, from /proc/self/mountinfo (field 5 is the mount point, with
// spaces and the like escaped in octal).
func isMountPoint(path string) (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMount(f[4]) == path {
			return true, nil
		}
	}
	return false, nil
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
