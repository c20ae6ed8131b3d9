package labbench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// syscallEvents are what RUNOS_BENCH_SYSCALLS counts per program during a
// transfer: the datagrams' batched system calls (recvmmsg/sendmmsg, and
// the single sendmsg/recvmsg a batch of one may use), the TUN's reads and
// writes, and the wake-ups (futex, epoll waits, context switches), so a
// transfer's cost per GB compares by kind between RunOS and upstream
// wireguard-go (issue 24).
var syscallEvents = []string{
	"syscalls:sys_enter_recvmmsg", "syscalls:sys_enter_sendmmsg",
	"syscalls:sys_enter_recvmsg", "syscalls:sys_enter_sendmsg",
	"syscalls:sys_enter_read", "syscalls:sys_enter_write",
	"syscalls:sys_enter_futex", "syscalls:sys_enter_epoll_pwait", "sched:sched_switch",
}

// syscallsDuring counts syscallEvents per thread on the whole machine
// (perf stat -a --per-thread) into file for secs seconds. The returned
// func waits for it.
func (w *world) syscallsDuring(file string, secs int) func() {
	w.b.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		w.b.Fatal(err)
	}
	cmd := exec.Command("perf", "stat", "-a", "--per-thread", "-x", ",", "-o", file,
		"-e", strings.Join(syscallEvents, ","), "--", "sleep", strconv.Itoa(secs))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		w.b.Fatalf("perf stat: %v", err)
	}
	return func() {
		if err := cmd.Wait(); err != nil {
			w.b.Fatalf("perf stat: %v\n%s", err, out)
		}
	}
}

// syscallCounts reads a perf stat --per-thread CSV file into counts by
// program (the thread's command name less its thread id) and event.
func syscallCounts(file string) (map[string]map[string]float64, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// comm-tid,count,unit,event,...
		fs := strings.Split(sc.Text(), ",")
		if len(fs) < 4 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		n, err := strconv.ParseFloat(fs[1], 64)
		if err != nil || n == 0 {
			continue
		}
		prog := fs[0]
		if i := strings.LastIndexByte(prog, '-'); i > 0 {
			prog = prog[:i]
		}
		ev := strings.TrimPrefix(strings.TrimPrefix(fs[3], "syscalls:sys_enter_"), "sched:")
		if out[prog] == nil {
			out[prog] = map[string]float64{}
		}
		out[prog][ev] += n
	}
	return out, sc.Err()
}

// syscallTable is the counts of the programs named (prefixes of their
// command names), per GB carried (gb), as text for the log.
func syscallTable(counts map[string]map[string]float64, gb float64, progs ...string) string {
	var b strings.Builder
	var evs []string
	for _, e := range syscallEvents {
		evs = append(evs, strings.TrimPrefix(strings.TrimPrefix(e, "syscalls:sys_enter_"), "sched:"))
	}
	fmt.Fprintf(&b, "%-18s %s (per GB carried)\n", "program", strings.Join(evs, " "))
	names := make([]string, 0, len(counts))
	for p := range counts {
		for _, want := range progs {
			if strings.HasPrefix(p, want) {
				names = append(names, p)
				break
			}
		}
	}
	sort.Strings(names)
	for _, p := range names {
		fmt.Fprintf(&b, "%-18s", p)
		for _, e := range evs {
			fmt.Fprintf(&b, " %s=%.0f", e, counts[p][e]/gb)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
