package installer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// scmHarness runs an scmProgram as the service manager would, recording
// what happened in order.
type scmHarness struct {
	mu     sync.Mutex
	events []string
	exited chan int
	p      *scmProgram
}

func newSCMHarness(run func(context.Context) error, cleanupErr error) *scmHarness {
	h := &scmHarness{exited: make(chan int, 1)}
	h.p = &scmProgram{
		parent: context.Background(),
		run: func(ctx context.Context) error {
			h.add("run")
			return run(ctx)
		},
		cleanup: func(ctx context.Context) error {
			if ctx.Err() != nil {
				h.add("cleanup with a dead context")
			}
			h.add("cleanup")
			return cleanupErr
		},
		exit:   func(code int) { h.add("exit"); h.exited <- code },
		logErr: func(msg string) { h.add("log: " + strings.SplitN(msg, "\n", 2)[0]) },
	}
	return h
}

func (h *scmHarness) add(e string) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *scmHarness) got() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.events, " | ")
}

func (h *scmHarness) waitDone(t *testing.T) {
	t.Helper()
	h.p.mu.Lock()
	done := h.p.done
	h.p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon never finished")
	}
}

func TestSCMProgramStopCleansUp(t *testing.T) {
	h := newSCMHarness(func(ctx context.Context) error { <-ctx.Done(); return nil }, nil)
	if err := h.p.Start(nil); err != nil {
		t.Fatal(err)
	}
	if err := h.p.Stop(nil); err != nil {
		t.Fatal(err)
	}
	// Stop returns only after the clean-up: the SCM is told "stopped" with
	// DNS and the tunnel already undone.
	if h.got() != "run | cleanup" {
		t.Errorf("events %q", h.got())
	}
	if err := h.p.result(); err != nil {
		t.Errorf("result %v", err)
	}
	select {
	case code := <-h.exited:
		t.Errorf("a stopped daemon exited the process (%d)", code)
	default:
	}
}

func TestSCMProgramStopWithErrorCleansUp(t *testing.T) {
	h := newSCMHarness(func(ctx context.Context) error { <-ctx.Done(); return errors.New("teardown failed") }, errors.New("dns busy"))
	h.p.Start(nil)
	if err := h.p.Stop(nil); err != nil {
		t.Fatal(err)
	}
	if want := "run | log: runos vpnd: teardown failed | cleanup | log: clean-up after the daemon: dns busy"; h.got() != want {
		t.Errorf("events %q, want %q", h.got(), want)
	}
	err := h.p.result()
	if err == nil || !strings.Contains(err.Error(), "teardown failed") || !strings.Contains(err.Error(), "clean-up after the daemon: dns busy") {
		t.Errorf("result %v", err)
	}
	if len(h.exited) != 0 {
		t.Error("a stopped daemon exited the process")
	}
}

func TestSCMProgramFailureCleansUpThenExits(t *testing.T) {
	h := newSCMHarness(func(context.Context) error { return errors.New("local API socket: in use") }, nil)
	h.p.Start(nil)
	select {
	case code := <-h.exited:
		if code != 1 {
			t.Errorf("exit %d, want 1 (for the recovery actions)", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a failed daemon did not exit")
	}
	if want := "run | log: runos vpnd: local API socket: in use | cleanup | exit"; h.got() != want {
		t.Errorf("events %q, want %q", h.got(), want)
	}
}

func TestSCMProgramPanicCleansUpThenExits(t *testing.T) {
	h := newSCMHarness(func(context.Context) error { panic("boom") }, nil)
	h.p.Start(nil)
	select {
	case code := <-h.exited:
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a panicking daemon did not exit")
	}
	if want := "run | log: runos vpnd: panic: boom | cleanup | exit"; h.got() != want {
		t.Errorf("events %q, want %q", h.got(), want)
	}
	if err := h.p.result(); err == nil || !strings.Contains(err.Error(), "scmprogram_test.go") {
		t.Errorf("the panic's error lacks its stack: %v", err)
	}
}

func TestSCMProgramCleanExitOnItsOwn(t *testing.T) {
	// A daemon that returns nil by itself is not a failure: no exit(1),
	// but still cleaned up after.
	h := newSCMHarness(func(context.Context) error { return nil }, nil)
	h.p.Start(nil)
	h.waitDone(t)
	if h.got() != "run | cleanup" || len(h.exited) != 0 {
		t.Errorf("events %q, exits %d", h.got(), len(h.exited))
	}
}

func TestSCMProgramNoCleanup(t *testing.T) {
	h := newSCMHarness(func(ctx context.Context) error { <-ctx.Done(); return nil }, nil)
	h.p.cleanup = nil
	h.p.Start(nil)
	if err := h.p.Stop(nil); err != nil || h.got() != "run" {
		t.Errorf("stop %v, events %q", err, h.got())
	}
	if (&scmProgram{}).Stop(nil) != nil {
		t.Error("Stop before Start")
	}
}
