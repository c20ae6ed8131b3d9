package dnsplit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/runos/vpn/internal/atomicfile"
)

// journalFile is the record of changes, in the daemon's state directory.
const journalFile = "dns-changes.json"

// Kinds of recorded change.
const (
	kindResolvConf   = "resolv.conf"   // Path was replaced; Original is what it held
	kindResolvedLink = "resolved-link" // Interface (index Index) got per-link DNS
	kindResolverFile = "resolver-file" // Path was written with Written
	kindNRPTRule     = "nrpt-rule"     // registry key Key was created
)

// change is one recorded change: enough to undo it with nothing else known.
type change struct {
	Kind string `json:"kind"`

	Path     string      `json:"path,omitempty"`
	Original []byte      `json:"original,omitempty"` // resolv.conf as it was, byte for byte
	Perm     fs.FileMode `json:"perm,omitempty"`     // its permission bits
	Symlink  string      `json:"symlink,omitempty"`  // resolv.conf was a symlink to this
	Missing  bool        `json:"missing,omitempty"`  // resolv.conf did not exist
	Written  []byte      `json:"written,omitempty"`  // what we put there

	Interface string `json:"interface,omitempty"`
	Index     int    `json:"index,omitempty"`

	Key string `json:"key,omitempty"`
}

// id names what a change touches; one change per id is recorded.
func (c change) id() string { return c.Kind + " " + c.Path + c.Interface + c.Key }

// journalDoc is the file's layout.
type journalDoc struct {
	Version int      `json:"version"`
	Changes []change `json:"changes"`
}

// journal is the on-disk record of what split DNS changed. Every change is
// written here (0600, atomically) before it is made and dropped after it is
// undone, so Cleanup can finish the job after a crash.
type journal struct {
	path string
	mu   sync.Mutex
}

func openJournal(stateDir string) (*journal, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("dns: state directory: %w", err)
	}
	return &journal{path: filepath.Join(stateDir, journalFile)}, nil
}

// load reads the recorded changes; a missing file is no changes.
func (j *journal) load() ([]change, error) {
	b, err := os.ReadFile(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dns: read %s: %w", j.path, err)
	}
	var d journalDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("dns: %s is damaged (%v); fix or remove it after checking what it records", j.path, err)
	}
	return d.Changes, nil
}

func (j *journal) save(cs []change) error {
	if len(cs) == 0 {
		if err := os.Remove(j.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("dns: remove %s: %w", j.path, err)
		}
		return nil
	}
	b, err := json.MarshalIndent(journalDoc{Version: 1, Changes: cs}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(j.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("dns: record change: %w", err)
	}
	return nil
}

// record adds c, replacing an earlier change to the same thing.
func (j *journal) record(c change) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	cs, err := j.load()
	if err != nil {
		return err
	}
	cs = slices.DeleteFunc(cs, func(o change) bool { return o.id() == c.id() })
	return j.save(append(cs, c))
}

// forget drops the change with c's id once it is undone.
func (j *journal) forget(c change) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	cs, err := j.load()
	if err != nil {
		return err
	}
	n := len(cs)
	cs = slices.DeleteFunc(cs, func(o change) bool { return o.id() == c.id() })
	if len(cs) == n {
		return nil
	}
	return j.save(cs)
}

// undoer undoes one kind of change; per-OS code supplies the ones it can.
type undoer func(change) error

// cleanup undoes every recorded change it has an undoer for. What fails (or
// has no undoer here) stays recorded; the errors are joined. An undoer that
// finds another program's file where ours was says errLeftForeign: that is
// no failure, and the record stays.
func cleanup(stateDir string, log *slog.Logger, undo map[string]undoer) error {
	j, err := openJournal(stateDir)
	if err != nil {
		return err
	}
	cs, err := j.load()
	if err != nil || len(cs) == 0 {
		return err
	}
	var errs []error
	// Undo in reverse order: the last change made is the first undone.
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		u := undo[c.Kind]
		if u == nil {
			errs = append(errs, fmt.Errorf("dns: cannot undo %s on this OS", c.id()))
			continue
		}
		err := u(c)
		if errors.Is(err, errLeftForeign) {
			// Theirs stays, and so does our record: it is replaced by the
			// next change, and never discarded only because the file differs.
			log.Warn("dns: left as it is: "+err.Error(), "change", c.id())
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("dns: undo %s: %w", c.id(), err))
			continue
		}
		log.Info("dns: undid recorded change", "change", c.id())
		if err := j.forget(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
