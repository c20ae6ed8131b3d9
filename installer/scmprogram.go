package installer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/kardianos/service"
)

// cleanupTimeout bounds the clean-up after the daemon under the service
// manager (it undoes DNS and removes the tunnel: well under a second).
const cleanupTimeout = 10 * time.Second

// scmProgram is the daemon as the Windows service manager runs it (through
// kardianos/service): Start runs it, Stop cancels it and waits for its
// teardown. Whenever the daemon's run returns, stopped, failed or
// panicking, the clean-up runs next (the SCM has nothing like systemd's
// ExecStopPost=), so a daemon that failed half-way leaves no DNS rule or
// tunnel behind even if the SCM does not start it again. It lives in an
// untagged file so that it is tested on every OS; RunDaemon in
// rundaemon_windows.go is its only user.
type scmProgram struct {
	run     func(context.Context) error
	cleanup func(context.Context) error // nil: none
	parent  context.Context
	exit    func(code int)   // os.Exit
	logErr  func(msg string) // the service's event log; nil: none

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (p *scmProgram) Start(service.Service) error {
	ctx, cancel := context.WithCancel(p.parent)
	p.mu.Lock()
	p.cancel, p.done = cancel, make(chan struct{})
	done := p.done
	p.mu.Unlock()
	go p.serve(ctx, done)
	return nil
}

// serve runs the daemon, then the clean-up. A daemon that ended on its own
// (an error or a panic, not a Stop) makes the process exit with status 1
// without telling the service manager it stopped, so that its recovery
// actions restart it.
func (p *scmProgram) serve(ctx context.Context, done chan struct{}) {
	err, panicked := p.runGuarded(ctx)
	failed := panicked || (err != nil && ctx.Err() == nil)
	if err != nil {
		p.log(fmt.Sprintf("runos vpnd: %v", err))
	}
	if p.cleanup != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(p.parent), cleanupTimeout)
		cerr := p.cleanup(cctx)
		cancel()
		if cerr != nil {
			cerr = fmt.Errorf("clean-up after the daemon: %w", cerr)
			p.log(cerr.Error())
			err = errors.Join(err, cerr)
		}
	}
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	close(done)
	if failed && ctx.Err() == nil {
		p.exit(1)
	}
}

// runGuarded runs the daemon; a panic in its goroutine becomes an error
// (with the stack, for the log) so that the clean-up still runs.
func (p *scmProgram) runGuarded(ctx context.Context) (err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			err, panicked = fmt.Errorf("panic: %v\n%s", r, debug.Stack()), true
		}
	}()
	return p.run(ctx), false
}

func (p *scmProgram) Stop(service.Service) error {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-time.After(20 * time.Second):
		return errors.New("the daemon did not stop within 20 s")
	}
}

// result is what the daemon and its clean-up returned.
func (p *scmProgram) result() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *scmProgram) log(msg string) {
	if p.logErr != nil {
		p.logErr(msg)
	}
}
