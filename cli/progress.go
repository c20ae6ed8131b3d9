package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress shows what a command is waiting for. On a terminal it draws a
// spinner on one line, redrawn in place; elsewhere (a pipe, a log, a test)
// it prints each new message once, on its own line, so logs stay readable.
// Text written through it (the sign-in URL from auth.Flow) clears the
// spinner first and is never overdrawn.
type progress struct {
	w   io.Writer
	tty bool

	mu    sync.Mutex
	msg   string
	frame int
	drawn bool // the spinner line is on screen
	stop  chan struct{}
	done  chan struct{}
}

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// startProgress shows msg until Stop.
func (a *app) startProgress(msg string) *progress {
	p := &progress{w: a.env.Stderr, tty: a.env.IsTerminal(a.env.Stderr)}
	p.Set(msg)
	if p.tty {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.spin()
	}
	return p
}

func (p *progress) spin() {
	defer close(p.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.frame++
			p.draw()
			p.mu.Unlock()
		}
	}
}

// draw redraws the spinner line; p.mu is held.
func (p *progress) draw() {
	if p.msg == "" {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K%s %s", spinFrames[p.frame%len(spinFrames)], p.msg)
	p.drawn = true
}

// clear removes the spinner line; p.mu is held.
func (p *progress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// Set changes the message.
func (p *progress) Set(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if msg == p.msg {
		return
	}
	p.msg = msg
	if p.tty {
		p.draw()
		return
	}
	if msg != "" {
		fmt.Fprintln(p.w, msg)
	}
}

// Write prints text above the spinner.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.clear()
	}
	n, err := p.w.Write(b)
	if p.tty && strings.HasSuffix(string(b), "\n") {
		p.draw()
	}
	return n, err
}

// Stop removes the spinner and prints final (if not empty) on its own line.
func (p *progress) Stop(final string) {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.clear()
	}
	p.msg = ""
	if final != "" {
		fmt.Fprintln(p.w, final)
	}
}
