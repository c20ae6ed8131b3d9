package dnsplit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/runos/vpn/internal/fault"
)

// nrptKeyPrefix names the rule keys split DNS owns under DnsPolicyConfig;
// one key per connected cluster.
const nrptKeyPrefix = "RunOS-"

// nrptMode is Windows' per-domain DNS: one Name Resolution Policy Table rule
// per cluster, sending its domains to its server.
type nrptMode struct {
	modeState
	opt Options
	log *slog.Logger
	j   *journal
	reg Registry

	have map[string][]RegistryValue // key → values we wrote; under mu
}

func newNRPTMode(opt Options, j *journal, reg Registry, reason string) *nrptMode {
	return &nrptMode{modeState: newModeState(ModeNRPT, reason), opt: opt, log: opt.Logger, j: j, reg: reg, have: map[string][]RegistryValue{}}
}

// nrptValues is one rule as the DNS Client service reads it (the layout
// Add-DnsClientNrptRule writes): a leading-dot name is a suffix rule; the
// bare name covers the domain itself; ConfigOptions 0x8 means "use
// GenericDNSServers".
func nrptValues(r Route) []RegistryValue {
	var names []string
	for _, d := range r.Domains {
		names = append(names, "."+d, d)
	}
	return []RegistryValue{
		{Name: "Version", Type: RegDWord, DWord: 2},
		{Name: "Name", Type: RegMultiStr, Strings: names},
		{Name: "GenericDNSServers", Type: RegString, Strings: []string{r.Server.String()}},
		{Name: "ConfigOptions", Type: RegDWord, DWord: 0x8},
		{Name: "IPSECCARestriction", Type: RegString, Strings: []string{""}},
		{Name: "DisplayName", Type: RegString, Strings: []string{"RunOS VPN: cluster " + r.CID}},
		{Name: "Comment", Type: RegString, Strings: []string{"Written by runos vpnd; removed on disconnect and by runos vpnd --cleanup."}},
	}
}

func (m *nrptMode) Set(_ context.Context, routes []Route) error {
	return m.apply(routes, m.set)
}

// set makes the rules those of routes (normalized), under mu.
func (m *nrptMode) set(routes []Route) error {
	want := map[string][]RegistryValue{}
	for _, r := range routes {
		want[nrptKeyPrefix+r.CID] = nrptValues(r)
	}
	var errs []error
	changed := false
	for _, k := range slices.Sorted(maps.Keys(m.have)) {
		if _, ok := want[k]; ok {
			continue
		}
		if err := m.reg.DeleteKey(k); err != nil {
			errs = append(errs, fmt.Errorf("dns: delete NRPT rule %s: %w", k, err))
			continue
		}
		delete(m.have, k)
		changed = true
		errs = append(errs, m.j.forget(change{Kind: kindNRPTRule, Key: k}))
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if slices.EqualFunc(m.have[k], want[k], regValueEqual) {
			continue
		}
		c := change{Kind: kindNRPTRule, Key: k}
		if err := m.j.record(c); err != nil {
			errs = append(errs, err)
			continue
		}
		fault.Point("nrpt-recorded")
		if err := m.reg.SetKey(k, want[k]); err != nil {
			_ = m.reg.DeleteKey(k)
			_ = m.j.forget(c)
			errs = append(errs, fmt.Errorf("dns: write NRPT rule %s: %w", k, err))
			continue
		}
		m.have[k] = want[k]
		changed = true
	}
	if changed {
		m.flush()
		m.log.Info("dns: NRPT rules", "keys", strings.Join(slices.Sorted(maps.Keys(m.have)), ","))
	}
	return errors.Join(errs...)
}

// flush tells the DNS Client service to drop cached answers, where the
// registry can (the Windows one calls DnsFlushResolverCache).
func (m *nrptMode) flush() {
	if f, ok := m.reg.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			m.log.Debug("dns: flush resolver cache", "err", err)
		}
	}
}

func regValueEqual(a, b RegistryValue) bool {
	return a.Name == b.Name && a.Type == b.Type && a.DWord == b.DWord && slices.Equal(a.Strings, b.Strings)
}

func (m *nrptMode) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.set(nil)
}
