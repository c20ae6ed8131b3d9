package installer

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/kardianos/service"
)

// RunDaemon runs the daemon's body. Started by the Windows service manager,
// a program must answer its control dispatcher (or be killed after 30 s),
// so run goes through kardianos/service, whose Stop cancels run's context
// and waits for its teardown. From a terminal it just runs.
func RunDaemon(ctx context.Context, run func(ctx context.Context) error) error {
	if service.Interactive() {
		return run(ctx)
	}
	p := &scmProgram{run: run, parent: ctx}
	s, err := service.New(p, &service.Config{Name: DefaultName})
	if err != nil {
		return err
	}
	if err := s.Run(); err != nil {
		return err
	}
	return p.err
}

type scmProgram struct {
	run    func(context.Context) error
	parent context.Context

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (p *scmProgram) Start(service.Service) error {
	ctx, cancel := context.WithCancel(p.parent)
	p.mu.Lock()
	p.cancel, p.done = cancel, make(chan struct{})
	p.mu.Unlock()
	go func() {
		err := p.run(ctx)
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
		if err != nil && ctx.Err() == nil {
			// Failed on its own: exit without telling the service manager
			// it stopped, so its recovery actions restart it.
			os.Exit(1)
		}
	}()
	return nil
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
