package installer

import (
	"context"
	"os"

	"github.com/kardianos/service"
)

// RunDaemon runs the daemon's body. Started by the Windows service manager,
// a program must answer its control dispatcher (or be killed after 30 s),
// so run goes through kardianos/service, whose Stop cancels run's context
// and waits for its teardown; cleanup (what `runos vpnd --cleanup` does)
// runs after run returns, however it returns, because the SCM runs nothing
// after a service stops (see scmProgram). From a terminal it just runs, as
// `runos vpnd` does by hand elsewhere.
func RunDaemon(ctx context.Context, run, cleanup func(ctx context.Context) error) error {
	if service.Interactive() {
		return run(ctx)
	}
	p := &scmProgram{run: run, cleanup: cleanup, parent: ctx, exit: os.Exit}
	s, err := service.New(p, &service.Config{Name: DefaultName})
	if err != nil {
		return err
	}
	if l, err := s.Logger(nil); err == nil {
		p.logErr = func(msg string) { _ = l.Error(msg) }
	}
	if err := s.Run(); err != nil {
		return err
	}
	return p.result()
}
