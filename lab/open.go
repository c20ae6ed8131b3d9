//go:build !windows

package lab

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"
)

// Open attaches to a running lab by its directory (for exec, status, and
// tests that restart its programs).
func Open(dir string) (*Lab, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	rec, err := LoadRecord(abs)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("no lab in %s (start one with: runos-lab up --dir %s)", abs, abs)
	}
	env, err := LoadEnv(abs)
	if err != nil {
		return nil, err
	}
	storeKind, replicas := env.Store, env.ControlReplicas
	if storeKind == "" {
		storeKind, replicas = StoreSQLite, 1 // a lab of an older runos-lab
	}
	topo, err := TopologyFor(len(env.Clients), storeKind, replicas)
	if err != nil {
		return nil, err
	}
	var ttl time.Duration
	if env.SessionTTL != "" {
		if ttl, err = time.ParseDuration(env.SessionTTL); err != nil {
			return nil, fmt.Errorf("env.json sessionTtl: %w", err)
		}
	}
	sec := &Secrets{Password: env.Password, OperatorToken: env.OperatorToken, DBPassword: dbPassword(env),
		IdPPasswords: map[string]string{}}
	for _, u := range env.Users {
		if u.SignIn == SignInOIDC {
			sec.IdPPasswords[u.Email] = u.Password
		}
	}
	return &Lab{
		dir: abs, bin: env.BinDir, names: NamesFor(abs), topo: topo, ttl: ttl,
		secrets: sec,
		run:     ExecRunner{}, log: slog.New(slog.DiscardHandler), progress: io.Discard, now: time.Now,
		j:   &journal{path: filepath.Join(abs, RecordFile), rec: *rec},
		env: env, metrics: env.PrometheusURL != "", recordRelay: rec.RecordRelay,
	}, nil
}
