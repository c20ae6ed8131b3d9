package dnsplit

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileWatch calls changed (debounced) whenever path may have been written:
// through its directory (a rename onto it, as most programs do) or through
// its inode (an in-place write, the only kind a bind mount allows, possibly
// made through another path such as /etc/netns/NS/resolv.conf).
type fileWatch struct {
	f       *os.File
	fd      int
	path    string
	changed func()

	mu    sync.Mutex
	timer *time.Timer
	done  chan struct{}
}

const (
	watchDebounce = 50 * time.Millisecond
	dirEvents     = unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM
	fileEvents    = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
)

func watchFile(path string, changed func()) (*fileWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &fileWatch{fd: fd, path: path, changed: changed, done: make(chan struct{})}
	// A non-blocking fd in an *os.File goes through the runtime poller, so
	// Close wakes the reader.
	w.f = os.NewFile(uintptr(fd), "inotify")
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), dirEvents); err != nil {
		w.f.Close()
		return nil, fmt.Errorf("watch %s: %w", filepath.Dir(path), err)
	}
	w.rewatchFile()
	go w.loop()
	return w, nil
}

// rewatchFile (re)arms the watch on the inode path now names; after a rename
// onto path that is a new inode.
func (w *fileWatch) rewatchFile() {
	_, _ = unix.InotifyAddWatch(w.fd, w.path, fileEvents)
}

func (w *fileWatch) loop() {
	defer close(w.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	base := filepath.Base(w.path)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		hit := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				nb := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				for i, c := range nb {
					if c == 0 {
						nb = nb[:i]
						break
					}
				}
				name = string(nb)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			// Directory events name a child; the file's own events do not.
			if name == "" || name == base {
				hit = true
			}
		}
		if hit {
			w.rewatchFile()
			w.kick()
		}
	}
}

// kick runs changed once things have been quiet for watchDebounce: writers
// often truncate, then write, then rename.
func (w *fileWatch) kick() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = time.AfterFunc(watchDebounce, w.changed)
}

func (w *fileWatch) Close() {
	w.f.Close()
	<-w.done
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
}
