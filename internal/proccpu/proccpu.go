//go:build linux

// Package proccpu reads how much CPU a process has used, for benchmarks
// that count a server's and its clients' time apart (control's fan-out and
// failover, TLS handshakes).
package proccpu

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Self is this process's user and system time so far.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Of is process pid's user and system time so far, from Linux's
// /proc/PID/stat (in the kernel's ticks of 10 ms: count over a few hundred
// milliseconds at least); 0 where that cannot be read.
func Of(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// The command name in parentheses may hold spaces: count from after it.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / 100 // USER_HZ
}
