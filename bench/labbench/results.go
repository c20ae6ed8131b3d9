package labbench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Result is one benchmark run's document in bench/results/: what was
// measured, on what machine, with which parameters, every sample and the
// summaries, so a number in docs/performance.md can be traced back to it.
type Result struct {
	Benchmark  string    `json:"benchmark"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	// Reproduce is the command that runs this benchmark again the same way.
	Reproduce string         `json:"reproduce"`
	Machine   Machine        `json:"machine"`
	Params    map[string]any `json:"params"`
	// Summaries and Samples share their keys; durations are in ms.
	Summaries map[string]Summary   `json:"summaries"`
	Samples   map[string][]float64 `json:"samples,omitempty"`
	// Values are single numbers (memory, rates), with the unit in the key.
	Values map[string]float64 `json:"values,omitempty"`
	Notes  []string           `json:"notes,omitempty"`
	// Detail is the benchmark's own record (per move, per round).
	Detail any `json:"detail,omitempty"`
}

// NewResult starts a result for a benchmark.
func NewResult(name string, now time.Time, m Machine) *Result {
	return &Result{Benchmark: name, StartedAt: now.UTC(), Machine: m, Params: map[string]any{},
		Summaries: map[string]Summary{}, Samples: map[string][]float64{}, Values: map[string]float64{}}
}

// AddSamples records samples under key with their summary.
func (r *Result) AddSamples(key string, samples []float64) Summary {
	s := Summarize(samples)
	r.Samples[key] = samples
	r.Summaries[key] = s
	return s
}

// AddDurations records durations (as ms) under key with their summary.
func (r *Result) AddDurations(key string, ds []time.Duration) Summary {
	return r.AddSamples(key, Millis(ds))
}

// FileName is where Write puts the result inside dir.
func (r *Result) FileName() string {
	return fmt.Sprintf("%s-%s.json", r.Benchmark, r.StartedAt.UTC().Format("20060102T150405Z"))
}

// Write stores the result in dir (created if needed) atomically and returns
// the file's path.
func (r *Result) Write(dir string, now time.Time) (string, error) {
	r.FinishedAt = now.UTC()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode %s result: %w", r.Benchmark, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("results directory: %w", err)
	}
	path := filepath.Join(dir, r.FileName())
	tmp, err := os.CreateTemp(dir, ".result-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// Machine is what a number depends on besides the code.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel,omitempty"`
	MemoryMB  int    `json:"memoryMB,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"goVersion"`
	// LoadAvg is the 1-minute load when the run started: others share
	// these machines, and a busy one shows up here.
	LoadAvg float64 `json:"loadAvg1m"`
	Commit  string  `json:"commit,omitempty"`
	Note    string  `json:"note,omitempty"`
}

// DescribeMachine reads the machine's facts from a /proc file system
// (fsys rooted at /); what it cannot read it leaves empty.
func DescribeMachine(fsys fs.FS) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := fs.ReadFile(fsys, "proc/cpuinfo"); err == nil {
		m.CPUModel = procField(b, "model name")
	}
	if b, err := fs.ReadFile(fsys, "proc/meminfo"); err == nil {
		if f := strings.Fields(procField(b, "MemTotal")); len(f) > 0 {
			if kb, err := strconv.Atoi(f[0]); err == nil {
				m.MemoryMB = kb / 1024
			}
		}
	}
	if b, err := fs.ReadFile(fsys, "proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := fs.ReadFile(fsys, "proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.LoadAvg, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	return m
}

// procField is the value of the first "key : value" line of a /proc file.
func procField(b []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// StatusKB is a size field (VmRSS, VmHWM) of a /proc/<pid>/status
// document, in kB.
func StatusKB(status []byte, field string) (int, error) {
	v := procField(status, field)
	f := strings.Fields(v)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("no %s in kB in the process status (got %q)", field, v)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: not a size", field, v)
	}
	return n, nil
}
