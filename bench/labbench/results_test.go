package labbench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"testing/fstest"
	"time"
)

func TestDescribeMachine(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/cpuinfo":              {Data: []byte("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t: x\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n")},
		"proc/meminfo":              {Data: []byte("MemTotal:       24683520 kB\nMemFree:  1 kB\n")},
		"proc/sys/kernel/osrelease": {Data: []byte("6.1.0-18-amd64\n")},
		"proc/loadavg":              {Data: []byte("0.52 0.40 0.33 1/200 1234\n")},
	}
	m := DescribeMachine(fsys)
	if m.CPUModel != "AMD EPYC" || m.MemoryMB != 24105 || m.Kernel != "6.1.0-18-amd64" || m.LoadAvg != 0.52 ||
		m.CPUs != runtime.NumCPU() || m.GoVersion != runtime.Version() {
		t.Errorf("DescribeMachine = %+v", m)
	}
	// Nothing readable: only what the runtime knows.
	if m := DescribeMachine(fstest.MapFS{}); m.CPUModel != "" || m.MemoryMB != 0 || m.CPUs == 0 {
		t.Errorf("DescribeMachine of an empty /proc = %+v", m)
	}
}

func TestStatusKB(t *testing.T) {
	st := []byte("Name:\trunos\nVmHWM:\t   21000 kB\nVmRSS:\t   19404 kB\nThreads:\t9\n")
	if n, err := StatusKB(st, "VmRSS"); err != nil || n != 19404 {
		t.Errorf("VmRSS = %d, %v", n, err)
	}
	if n, err := StatusKB(st, "VmHWM"); err != nil || n != 21000 {
		t.Errorf("VmHWM = %d, %v", n, err)
	}
	for _, bad := range []string{"", "VmRSS:\t12 MB\n", "VmRSS:\tlots kB\n", "VmRSS:\t-1 kB\n", "VmRSS:\n"} {
		if _, err := StatusKB([]byte(bad), "VmRSS"); err == nil {
			t.Errorf("StatusKB(%q) did not fail", bad)
		}
	}
}

func TestResultWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	start := time.Date(2026, 5, 1, 10, 20, 30, 0, time.UTC)
	r := NewResult("lab-move-switch", start, Machine{CPUs: 2})
	r.Params["moves"] = 20
	r.AddDurations("switch", []time.Duration{40 * time.Millisecond, 60 * time.Millisecond})
	r.Values["vpnd-rss-MiB"] = 19.5
	path, err := r.Write(dir, start.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "lab-move-switch-20260501T102030Z.json" {
		t.Errorf("result file %s", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Summaries["switch"].P50 != 40 || back.Summaries["switch"].Max != 60 || len(back.Samples["switch"]) != 2 ||
		!back.FinishedAt.Equal(start.Add(time.Minute)) || back.Values["vpnd-rss-MiB"] != 19.5 {
		t.Errorf("read back %+v", back)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("the results directory holds %d files (a temporary file left behind?)", len(ents))
	}
}
