//go:build !windows

package lab

import (
	"github.com/runos/vpn/internal/atomicfile"

	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// RecordFile is the name of the lab's journal inside its directory.
const RecordFile = "lab.json"

// Record is D/lab.json: everything the lab made, written before it is
// made, so that Down can undo a lab that died halfway through up.
type Record struct {
	Dir     string          `json:"dir"`
	Prefix  string          `json:"prefix"`
	Started time.Time       `json:"started"`
	Ready   bool            `json:"ready"`  // up finished
	Netns   []string        `json:"netns"`  // network namespaces, in creation order
	Mounts  []string        `json:"mounts"` // mount points, unmounted in reverse order
	Procs   []ProcRecord    `json:"procs"`
	Files   []string        `json:"files"` // entries of Dir the lab made, removed by down
	Hosts   map[string]bool `json:"hosts,omitempty"`
	// RecordRelay: the gateways record their relay streams (Options.RecordRelay).
	RecordRelay bool `json:"recordRelay,omitempty"`
}

// ProcRecord is a process the lab started. Start is the process's start
// time in clock ticks since boot (/proc/PID/stat field 22): a PID that was
// reused by another process after the lab's one died is never killed.
type ProcRecord struct {
	Name  string `json:"name"`
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	Log   string `json:"log,omitempty"`
}

// ParseRecord decodes a lab.json document.
func ParseRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("lab.json: %w", err)
	}
	for _, p := range r.Procs {
		if p.PID <= 1 {
			return nil, fmt.Errorf("lab.json: process %q has pid %d", p.Name, p.PID)
		}
	}
	return &r, nil
}

// LoadRecord reads D/lab.json; a missing file is (nil, nil): no lab there.
func LoadRecord(dir string) (*Record, error) {
	b, err := os.ReadFile(filepath.Join(dir, RecordFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseRecord(b)
}

// journal keeps the Record on disk: every method saves before returning,
// and callers call it before they create the thing.
type journal struct {
	mu   sync.Mutex
	path string
	rec  Record
}

func newJournal(dir, prefix string, now time.Time) (*journal, error) {
	j := &journal{path: filepath.Join(dir, RecordFile),
		rec: Record{Dir: dir, Prefix: prefix, Started: now, Files: []string{RecordFile}}}
	return j, j.saveLocked()
}

func (j *journal) update(f func(r *Record)) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(&j.rec)
	return j.saveLocked()
}

func (j *journal) saveLocked() error {
	b, err := json.MarshalIndent(&j.rec, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(j.path, b, 0o600)
}

func (j *journal) netns(name string) error {
	return j.update(func(r *Record) { r.Netns = append(r.Netns, name) })
}

func (j *journal) mount(path string) error {
	return j.update(func(r *Record) { r.Mounts = append(r.Mounts, path) })
}

func (j *journal) file(name string) error {
	return j.update(func(r *Record) {
		if !slices.Contains(r.Files, name) {
			r.Files = append(r.Files, name)
		}
	})
}

func (j *journal) proc(p ProcRecord) error {
	return j.update(func(r *Record) { r.Procs = append(r.Procs, p) })
}

func (j *journal) dropProc(pid int) error {
	return j.update(func(r *Record) {
		r.Procs = slices.DeleteFunc(r.Procs, func(p ProcRecord) bool { return p.PID == pid })
	})
}

func (j *journal) snapshot() Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.rec
	r.Procs = slices.Clone(r.Procs)
	return r
}
