//go:build linux

package server

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// devicesPerHelper is how many devices one helper process holds at most:
// each is a descriptor, and the machine's open-file limit per process
// (20,000 here, not raisable without CAP_SYS_RESOURCE) must leave room for
// the process's own. 50,000 or 100,000 devices run in several helpers.
// RUNOS_FANOUT_PER_HELPER sets it.
func devicesPerHelper() int {
	if v, err := strconv.Atoi(os.Getenv("RUNOS_FANOUT_PER_HELPER")); err == nil && v > 0 {
		return v // to try several helpers with few devices
	}
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Max > 1<<20 {
		return 50000
	}
	return max(1000, int(r.Max)-1000)
}

// deviceHelpers are the processes (this test binary re-executed as
// TestFanOutHelper) that hold BenchmarkMoveFanOutReplicas's devices,
// device g of all of them polling replica g mod N as a balancer would
// spread them. Their answers are merged: times into one distribution,
// CPU summed.
type deviceHelpers struct {
	tb    testing.TB
	procs []*deviceHelper
}

type deviceHelper struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
	times string // where it writes each round's (or failover's) times
	count int
}

// startDeviceHelpers splits tokens ("token deviceID" lines) over as many
// helpers as the open-file limit needs and waits until each has every
// device's first map.
func startDeviceHelpers(tb testing.TB, dir string, tokens, urls []string, caFile string, stream bool) *deviceHelpers {
	per := devicesPerHelper()
	hs := &deviceHelpers{tb: tb}
	tb.Cleanup(hs.close)
	for off := 0; off < len(tokens); off += per {
		part := tokens[off:min(off+per, len(tokens))]
		k := len(hs.procs)
		tokFile := filepath.Join(dir, fmt.Sprintf("devices-%d.txt", k))
		if err := os.WriteFile(tokFile, []byte(strings.Join(part, "\n")), 0o600); err != nil {
			tb.Fatal(err)
		}
		h := &deviceHelper{times: filepath.Join(dir, fmt.Sprintf("times-%d.txt", k)), count: len(part)}
		h.cmd = exec.Command(os.Args[0], "-test.run=^TestFanOutHelper$", "-test.v")
		h.cmd.Env = append(os.Environ(), "RUNOS_FANOUT_HELPER=1", "RUNOS_FANOUT_H2=false", "RUNOS_FANOUT_URL="+strings.Join(urls, ","),
			"RUNOS_FANOUT_CA="+caFile, "RUNOS_FANOUT_TOKENS="+tokFile, "RUNOS_FANOUT_STREAM="+strconv.FormatBool(stream),
			"RUNOS_FANOUT_OFFSET="+strconv.Itoa(off), "RUNOS_FANOUT_TIMES="+h.times)
		h.in, _ = h.cmd.StdinPipe()
		out, _ := h.cmd.StdoutPipe()
		h.cmd.Stderr = os.Stderr
		if err := h.cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		h.lines = bufio.NewScanner(out)
		hs.procs = append(hs.procs, h)
	}
	for _, h := range hs.procs {
		expectLine(tb, h.lines, "started")
	}
	return hs
}

func (hs *deviceHelpers) close() {
	for _, h := range hs.procs {
		h.in.Close()
		h.cmd.Process.Kill()
		h.cmd.Wait()
	}
}

// all sends line to every helper and returns each one's answer starting
// with prefix.
func (hs *deviceHelpers) all(line, prefix string) [][]string {
	for _, h := range hs.procs {
		fmt.Fprintln(h.in, line)
	}
	out := make([][]string, len(hs.procs))
	for k, h := range hs.procs {
		out[k] = expectLine(hs.tb, h.lines, prefix)
	}
	return out
}

// arm starts round i on every helper and returns when all are armed.
func (hs *deviceHelpers) arm(i int) { hs.all(fmt.Sprintf("round %d", i), "armed") }

// done waits for every device's map of the round: the merged arrival
// times (ns since the epoch, sorted) and the helpers' CPU, summed.
func (hs *deviceHelpers) done() ([]int64, time.Duration) {
	var ts []int64
	var cpu time.Duration
	for _, h := range hs.procs {
		f := expectLine(hs.tb, h.lines, "done")
		ns, _ := strconv.ParseInt(f[3], 10, 64)
		cpu += time.Duration(ns)
		ts = append(ts, hs.readTimes(h)...)
	}
	slices.Sort(ts)
	return ts, cpu
}

// failover counts, per helper, the devices on replica k (their polls or
// streams break when it is killed), runs kill, and returns the merged
// times (ns from the kill, sorted) until each is served again.
func (hs *deviceHelpers) failover(k int, kill func() time.Time) []int64 {
	onK := hs.all(fmt.Sprintf("on %d", k), "on")
	hs.all("arm", "armed-failover")
	killed := kill()
	for j, h := range hs.procs {
		fmt.Fprintf(h.in, "killed %d %s\n", killed.UnixNano(), onK[j][0])
	}
	var ts []int64
	for _, h := range hs.procs {
		if f := expectLine(hs.tb, h.lines, "failover"); f[0] != "0" {
			ts = append(ts, hs.readTimes(h)...)
		}
	}
	slices.Sort(ts)
	return ts
}

func (hs *deviceHelpers) readTimes(h *deviceHelper) []int64 {
	b, err := os.ReadFile(h.times)
	if err != nil {
		hs.tb.Fatalf("fan-out helper's times: %v", err)
	}
	var ts []int64
	for _, l := range strings.Fields(string(b)) {
		ns, _ := strconv.ParseInt(l, 10, 64)
		ts = append(ts, ns)
	}
	return ts
}

// quantileMS is the q-quantile of sorted ns values as ms after t0 (ns;
// 0 when the values are durations already).
func quantileMS(sorted []int64, q float64, t0 int64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(float64(len(sorted))*q))
	return float64(sorted[i]-t0) / float64(time.Millisecond)
}
