package installer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/store"
)

// installPlan is what Install found out before changing anything: the
// steps below carry it out, each registering its undo in the txn.
type installPlan struct {
	o         *Options
	h         *host
	spec      Spec
	m         manager
	src       string          // the running program
	comps     []companionCopy // files copied beside it
	op        *access.Operator
	installed bool // an upgrade
	res       *Result
}

// planInstall checks everything that can be refused before anything
// changes: root, the paths, the operator, the CA file, the service
// manager, and no daemon running outside the service.
func planInstall(ctx context.Context, o *Options) (*installPlan, error) {
	h := o.host
	if !h.admin() {
		return nil, NotAdminError{"vpn install"}
	}
	if !filepath.IsAbs(o.Binary) || !filepath.IsAbs(o.StateDir) {
		return nil, fmt.Errorf("install: the binary (%s) and the state directory (%s) must be absolute paths", o.Binary, o.StateDir)
	}
	p := &installPlan{o: o, h: h}
	name := o.Operator
	if name == "" {
		name = h.invoking(o.Getenv)
	}
	if name != "" {
		u, err := h.lookupUser(name)
		if err != nil {
			return nil, fmt.Errorf("install: operator %s: %w: give an existing user with --operator USER", name, err)
		}
		p.op = &u
	}
	if o.CAFile != "" {
		if _, err := os.ReadFile(o.CAFile); err != nil {
			return nil, fmt.Errorf("install: --ca-file: %w", err)
		}
	}
	var err error
	if p.src, err = h.executable(); err != nil {
		return nil, fmt.Errorf("install: find the running program: %w", err)
	}
	p.spec = o.spec()
	if p.comps, err = planCompanions(h.companions, p.src, p.spec.Binary); err != nil {
		return nil, err
	}
	if p.m, err = h.manager(p.spec); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	if p.installed, err = p.m.Installed(); err != nil {
		return nil, fmt.Errorf("install: is %s installed? %w", p.spec.Name, err)
	}
	if !p.installed {
		if v, _ := h.version(ctx, p.spec.Socket); v != nil {
			return nil, fmt.Errorf("install: a daemon the service did not start (version %s) answers on %s: stop it first", v.Version, p.spec.Socket)
		}
	}
	s := p.spec
	p.res = &Result{Service: s.Name, Platform: p.m.Platform(), Definition: p.m.Definition(), Binary: s.Binary,
		StateDir: s.StateDir, Socket: s.Socket, Trust: s.Trust, Upgraded: p.installed, Log: logHint(p.m.Platform(), s)}
	return p, nil
}

// stopForUpgrade stops the running service of an earlier install; undone
// by starting it again.
func (p *installPlan) stopForUpgrade(ctx context.Context, t *txn) error {
	if !p.installed {
		return nil
	}
	p.o.step("Stopping %s for the upgrade…", p.spec.Name)
	if err := stopAndWait(ctx, p.m, p.h, p.spec.Socket, p.o.StartTimeout); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	t.onFail(func() error { return startAndWait(ctx, p.m, p.h, p.spec.Socket, p.o.StartTimeout) })
	return nil
}

// placePrograms copies runos (and its companions) into place; the copies
// are committed by Install once the daemon answers.
func (p *installPlan) placePrograms(t *txn) ([]*placed, error) {
	if sameFile(p.src, p.spec.Binary) {
		p.o.step("Using %s where it is", p.spec.Binary)
	} else {
		p.o.step("Installing %s", p.spec.Binary)
	}
	bin, err := placeBinary(p.src, p.spec.Binary)
	if err != nil {
		return nil, err
	}
	t.onFail(bin.undo)
	all := []*placed{bin}
	for _, c := range p.comps {
		p.o.step("Installing %s", c.to)
		cp, err := placeBinary(c.from, c.to)
		if err != nil {
			return nil, err
		}
		t.onFail(cp.undo)
		all = append(all, cp)
	}
	return all, nil
}

// prepareState creates the state directory (root only) and records in it
// the CA, the operator and the daemon's trust.
func (p *installPlan) prepareState(t *txn) error {
	dir := p.spec.StateDir
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		t.onFail(func() error { return os.RemoveAll(dir) })
	}
	if _, err := store.Open(dir); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := secureStateDir(dir); err != nil {
		return fmt.Errorf("install: restrict %s to administrators: %w", dir, err)
	}
	if p.o.CAFile != "" {
		undo, err := replaceFile(filepath.Join(dir, CAFileName), func(dst string) error { return copyFile(p.o.CAFile, dst, 0o600) })
		if err != nil {
			return fmt.Errorf("install: copy the CA file: %w", err)
		}
		t.onFail(undo)
	}
	if !p.o.Trust.empty() {
		undo, err := recordTrust(dir, p.o.Trust)
		if err != nil {
			return fmt.Errorf("install: record --allowed-routes and --allowed-dns-domains: %w", err)
		}
		t.onFail(undo)
	}
	if p.op != nil {
		op := *p.op
		undo, err := replaceFile(filepath.Join(dir, access.OperatorFile), func(string) error { return access.WriteOperator(dir, op) })
		if err != nil {
			return fmt.Errorf("install: record the operator: %w", err)
		}
		t.onFail(undo)
		p.res.Operator = op.User
	} else if prev, err := access.ReadOperator(dir); err == nil && prev != nil {
		p.res.Operator = prev.User
	}
	return nil
}

// register gives the service manager the new definition (replacing an
// earlier one).
func (p *installPlan) register(t *txn) error {
	s, m := p.spec, p.m
	if p.installed {
		if err := m.Uninstall(); err != nil {
			return fmt.Errorf("install: replace the definition of %s: %w", s.Name, err)
		}
		t.onFail(m.Install)
	}
	p.o.step("Registering the service %s (%s)", s.Name, m.Platform())
	if err := m.Install(); err != nil {
		return fmt.Errorf("install: register %s with %s: %w", s.Name, m.Platform(), err)
	}
	t.onFail(m.Uninstall)
	return nil
}

// start starts the service and waits for the daemon to answer.
func (p *installPlan) start(ctx context.Context, t *txn) (*localapi.Version, error) {
	s := p.spec
	p.o.step("Starting it and waiting for the daemon on %s…", s.Socket)
	if err := p.m.Start(); err != nil {
		return nil, fmt.Errorf("install: start %s: %w; see %s", s.Name, err, p.res.Log)
	}
	t.onFail(func() error { return stopAndWait(ctx, p.m, p.h, s.Socket, p.o.StartTimeout) })
	v, err := waitAnswer(ctx, p.h, s.Socket, p.o.StartTimeout)
	if err != nil {
		return nil, fmt.Errorf("install: %s started, but the daemon did not answer on %s within %s (%v); see %s",
			s.Name, s.Socket, p.o.StartTimeout, err, p.res.Log)
	}
	return v, nil
}
